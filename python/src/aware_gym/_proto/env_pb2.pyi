from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EnvConfig(_message.Message):
    __slots__ = ("num_envs", "seed", "trace_seed", "profile_yaml", "scenario", "episode_steps", "day_seconds", "days", "mean_count", "population", "vertical_update")
    NUM_ENVS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TRACE_SEED_FIELD_NUMBER: _ClassVar[int]
    PROFILE_YAML_FIELD_NUMBER: _ClassVar[int]
    SCENARIO_FIELD_NUMBER: _ClassVar[int]
    EPISODE_STEPS_FIELD_NUMBER: _ClassVar[int]
    DAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DAYS_FIELD_NUMBER: _ClassVar[int]
    MEAN_COUNT_FIELD_NUMBER: _ClassVar[int]
    POPULATION_FIELD_NUMBER: _ClassVar[int]
    VERTICAL_UPDATE_FIELD_NUMBER: _ClassVar[int]
    num_envs: int
    seed: int
    trace_seed: int
    profile_yaml: str
    scenario: str
    episode_steps: int
    day_seconds: float
    days: int
    mean_count: float
    population: str
    vertical_update: str
    def __init__(self, num_envs: _Optional[int] = ..., seed: _Optional[int] = ..., trace_seed: _Optional[int] = ..., profile_yaml: _Optional[str] = ..., scenario: _Optional[str] = ..., episode_steps: _Optional[int] = ..., day_seconds: _Optional[float] = ..., days: _Optional[int] = ..., mean_count: _Optional[float] = ..., population: _Optional[str] = ..., vertical_update: _Optional[str] = ...) -> None: ...

class MakeRequest(_message.Message):
    __slots__ = ("env_id", "config")
    ENV_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    env_id: str
    config: EnvConfig
    def __init__(self, env_id: _Optional[str] = ..., config: _Optional[_Union[EnvConfig, _Mapping]] = ...) -> None: ...

class MakeResponse(_message.Message):
    __slots__ = ("session_id", "observation_space", "action_space", "num_envs", "episode_steps")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_SPACE_FIELD_NUMBER: _ClassVar[int]
    ACTION_SPACE_FIELD_NUMBER: _ClassVar[int]
    NUM_ENVS_FIELD_NUMBER: _ClassVar[int]
    EPISODE_STEPS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    observation_space: Space
    action_space: Space
    num_envs: int
    episode_steps: int
    def __init__(self, session_id: _Optional[str] = ..., observation_space: _Optional[_Union[Space, _Mapping]] = ..., action_space: _Optional[_Union[Space, _Mapping]] = ..., num_envs: _Optional[int] = ..., episode_steps: _Optional[int] = ...) -> None: ...

class Space(_message.Message):
    __slots__ = ("box", "discrete", "multi_discrete")
    BOX_FIELD_NUMBER: _ClassVar[int]
    DISCRETE_FIELD_NUMBER: _ClassVar[int]
    MULTI_DISCRETE_FIELD_NUMBER: _ClassVar[int]
    box: BoxSpace
    discrete: DiscreteSpace
    multi_discrete: MultiDiscreteSpace
    def __init__(self, box: _Optional[_Union[BoxSpace, _Mapping]] = ..., discrete: _Optional[_Union[DiscreteSpace, _Mapping]] = ..., multi_discrete: _Optional[_Union[MultiDiscreteSpace, _Mapping]] = ...) -> None: ...

class BoxSpace(_message.Message):
    __slots__ = ("low", "high", "shape", "dtype")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    low: _containers.RepeatedScalarFieldContainer[float]
    high: _containers.RepeatedScalarFieldContainer[float]
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: str
    def __init__(self, low: _Optional[_Iterable[float]] = ..., high: _Optional[_Iterable[float]] = ..., shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[str] = ...) -> None: ...

class DiscreteSpace(_message.Message):
    __slots__ = ("n", "start")
    N_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    n: int
    start: int
    def __init__(self, n: _Optional[int] = ..., start: _Optional[int] = ...) -> None: ...

class MultiDiscreteSpace(_message.Message):
    __slots__ = ("nvec",)
    NVEC_FIELD_NUMBER: _ClassVar[int]
    nvec: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, nvec: _Optional[_Iterable[int]] = ...) -> None: ...

class Actions(_message.Message):
    __slots__ = ("continuous", "discrete")
    CONTINUOUS_FIELD_NUMBER: _ClassVar[int]
    DISCRETE_FIELD_NUMBER: _ClassVar[int]
    continuous: _containers.RepeatedScalarFieldContainer[float]
    discrete: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, continuous: _Optional[_Iterable[float]] = ..., discrete: _Optional[_Iterable[int]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("session_id", "seed", "options")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    seed: int
    options: _containers.ScalarMap[str, str]
    def __init__(self, session_id: _Optional[str] = ..., seed: _Optional[int] = ..., options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("session_id", "action")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    action: Actions
    def __init__(self, session_id: _Optional[str] = ..., action: _Optional[_Union[Actions, _Mapping]] = ...) -> None: ...

class StepManyRequest(_message.Message):
    __slots__ = ("session_id", "actions")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    actions: Actions
    def __init__(self, session_id: _Optional[str] = ..., actions: _Optional[_Union[Actions, _Mapping]] = ...) -> None: ...

class Info(_message.Message):
    __slots__ = ("slo_violated", "dropped_requests", "oom_events", "illegal_action", "oscillation", "cpu_utilisation", "memory_utilisation", "slo_preservation", "replicas", "cpu_limit_millicores", "memory_limit_bytes", "usage_carried")
    SLO_VIOLATED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    OOM_EVENTS_FIELD_NUMBER: _ClassVar[int]
    ILLEGAL_ACTION_FIELD_NUMBER: _ClassVar[int]
    OSCILLATION_FIELD_NUMBER: _ClassVar[int]
    CPU_UTILISATION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_UTILISATION_FIELD_NUMBER: _ClassVar[int]
    SLO_PRESERVATION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CPU_LIMIT_MILLICORES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    USAGE_CARRIED_FIELD_NUMBER: _ClassVar[int]
    slo_violated: bool
    dropped_requests: int
    oom_events: int
    illegal_action: bool
    oscillation: bool
    cpu_utilisation: float
    memory_utilisation: float
    slo_preservation: float
    replicas: int
    cpu_limit_millicores: int
    memory_limit_bytes: int
    usage_carried: bool
    def __init__(self, slo_violated: _Optional[bool] = ..., dropped_requests: _Optional[int] = ..., oom_events: _Optional[int] = ..., illegal_action: _Optional[bool] = ..., oscillation: _Optional[bool] = ..., cpu_utilisation: _Optional[float] = ..., memory_utilisation: _Optional[float] = ..., slo_preservation: _Optional[float] = ..., replicas: _Optional[int] = ..., cpu_limit_millicores: _Optional[int] = ..., memory_limit_bytes: _Optional[int] = ..., usage_carried: _Optional[bool] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ("observation", "info")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    observation: _containers.RepeatedScalarFieldContainer[float]
    info: Info
    def __init__(self, observation: _Optional[_Iterable[float]] = ..., info: _Optional[_Union[Info, _Mapping]] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("observation", "reward", "terminated", "truncated", "info")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    observation: _containers.RepeatedScalarFieldContainer[float]
    reward: float
    terminated: bool
    truncated: bool
    info: Info
    def __init__(self, observation: _Optional[_Iterable[float]] = ..., reward: _Optional[float] = ..., terminated: _Optional[bool] = ..., truncated: _Optional[bool] = ..., info: _Optional[_Union[Info, _Mapping]] = ...) -> None: ...

class ResetManyResponse(_message.Message):
    __slots__ = ("observations", "infos")
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    INFOS_FIELD_NUMBER: _ClassVar[int]
    observations: _containers.RepeatedScalarFieldContainer[float]
    infos: _containers.RepeatedCompositeFieldContainer[Info]
    def __init__(self, observations: _Optional[_Iterable[float]] = ..., infos: _Optional[_Iterable[_Union[Info, _Mapping]]] = ...) -> None: ...

class StepManyResponse(_message.Message):
    __slots__ = ("observations", "rewards", "terminated", "truncated", "infos")
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    INFOS_FIELD_NUMBER: _ClassVar[int]
    observations: _containers.RepeatedScalarFieldContainer[float]
    rewards: _containers.RepeatedScalarFieldContainer[float]
    terminated: _containers.RepeatedScalarFieldContainer[bool]
    truncated: _containers.RepeatedScalarFieldContainer[bool]
    infos: _containers.RepeatedCompositeFieldContainer[Info]
    def __init__(self, observations: _Optional[_Iterable[float]] = ..., rewards: _Optional[_Iterable[float]] = ..., terminated: _Optional[_Iterable[bool]] = ..., truncated: _Optional[_Iterable[bool]] = ..., infos: _Optional[_Iterable[_Union[Info, _Mapping]]] = ...) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
