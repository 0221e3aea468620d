"""Gymnasium environments backed by ``aware serve-env``."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import grpc
import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ._proto import env_pb2, env_pb2_grpc
from .errors import AwareEnvError, from_rpc_error

__all__ = ["AwareEnv", "AwareVectorEnv"]

#: Config keys `Make` understands (see ``env.proto``'s ``EnvConfig``).
CONFIG_KEYS = (
    "seed",
    "trace_seed",
    "profile_yaml",
    "scenario",
    "episode_steps",
    "day_seconds",
    "days",
    "mean_count",
    "population",
    "vertical_update",
)

_SEED_BOUND = 2**63 - 1


def _space(msg: env_pb2.Space) -> spaces.Space:
    kind = msg.WhichOneof("kind")
    if kind == "box":
        shape = tuple(msg.box.shape) or (len(msg.box.low),)
        low = np.asarray(msg.box.low, dtype=np.float32).reshape(shape)
        high = np.asarray(msg.box.high, dtype=np.float32).reshape(shape)
        return spaces.Box(low=low, high=high, dtype=np.dtype(msg.box.dtype or "float32"))
    if kind == "discrete":
        return spaces.Discrete(int(msg.discrete.n), start=int(msg.discrete.start))
    if kind == "multi_discrete":
        return spaces.MultiDiscrete(np.asarray(msg.multi_discrete.nvec, dtype=np.int64))
    raise AwareEnvError("Make", grpc.StatusCode.UNKNOWN, f"the server sent a space this client does not know: {kind}")


def _info(msg: env_pb2.Info) -> dict[str, Any]:
    return {f.name: getattr(msg, f.name) for f in msg.DESCRIPTOR.fields}


class _Session:
    """One session on the server: a channel, the auth metadata and the spaces."""

    def __init__(
        self,
        env_id: str,
        address: str,
        token: Optional[str],
        num_envs: int,
        config: dict[str, Any],
        timeout: float,
        tls_ca: Optional[Union[str, bytes]],
    ):
        unknown = sorted(set(config) - set(CONFIG_KEYS) - {"profile"})
        if unknown:
            raise TypeError(f"unknown environment config key(s) {unknown}; known: {list(CONFIG_KEYS) + ['profile']}")
        config = dict(config)
        profile = config.pop("profile", None)
        if profile is not None:
            with open(profile, encoding="utf-8") as f:
                config["profile_yaml"] = f.read()
        if address.startswith("grpc://"):
            address = address[len("grpc://") :]
        if tls_ca is not None:
            if isinstance(tls_ca, str):
                with open(tls_ca, "rb") as f:
                    tls_ca = f.read()
            self.channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=tls_ca))
        else:
            self.channel = grpc.insecure_channel(address)
        self.stub = env_pb2_grpc.EnvServiceStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout
        self.session_id = ""
        made = self.call("Make", self.stub.Make, env_pb2.MakeRequest(env_id=env_id, config=env_pb2.EnvConfig(num_envs=num_envs, **config)))
        self.session_id = made.session_id
        self.num_envs = made.num_envs
        self.episode_steps = made.episode_steps
        self.observation_space = _space(made.observation_space)
        self.action_space = _space(made.action_space)

    def call(self, name: str, method, request):
        try:
            return method(request, metadata=self.metadata, timeout=self.timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(name, err) from None

    def actions(self, action: Any, n: int) -> env_pb2.Actions:
        space = self.action_space
        if isinstance(space, spaces.Box):
            values = np.asarray(action, dtype=np.float32).reshape(-1)
            return env_pb2.Actions(continuous=values.tolist())
        values = np.asarray(action).reshape(-1)
        if values.dtype.kind == "f":
            # A float that is not a whole number is not a discrete action; let the server say so.
            if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
                return env_pb2.Actions(continuous=values.astype(np.float32).tolist())
        return env_pb2.Actions(discrete=values.astype(np.int64).tolist())

    def close(self) -> None:
        if self.session_id:
            try:
                self.stub.Close(env_pb2.CloseRequest(session_id=self.session_id), metadata=self.metadata, timeout=5)
            except grpc.RpcError:
                pass  # the server's idle expiry frees the slot
            self.session_id = ""
        self.channel.close()


def _seed_from(rng: np.random.Generator) -> int:
    return int(rng.integers(0, _SEED_BOUND))


class AwareEnv(gym.Env):
    """One environment of ``aware serve-env`` (a session with one application or copy).

    ``gymnasium.make("aware/Autoscale-v0", address="host:port", token="...", seed=1)``; config
    keys: ``seed`` (the generated applications), ``trace_seed``, ``profile`` (a YAML file) or
    ``profile_yaml``, ``scenario`` (``NAME`` or ``NAME@STEP``), ``episode_steps``, ``day_seconds`` (at least 3600),
    and for ``aware/Provisioning-v0`` ``days`` and ``mean_count``.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        env_id: str = "aware/Autoscale-v0",
        address: str = "127.0.0.1:50051",
        token: Optional[str] = None,
        timeout: float = 60.0,
        tls_ca: Optional[Union[str, bytes]] = None,
        render_mode: Optional[str] = None,
        **config: Any,
    ):
        if render_mode is not None:
            raise ValueError(f"render_mode {render_mode!r}: aware environments do not render")
        self.render_mode = None
        self._session = _Session(env_id, address, token, 1, config, timeout, tls_ca)
        self.observation_space = self._session.observation_space
        self.action_space = self._session.action_space

    @property
    def session_id(self) -> str:
        return self._session.session_id

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        # Without a seed, carry on from the generator `reset(seed=...)` last seeded.
        wire_seed = seed if seed is not None else _seed_from(self.np_random)
        s = self._session
        request = env_pb2.ResetRequest(
            session_id=s.session_id, seed=int(wire_seed), options={str(k): str(v) for k, v in (options or {}).items()}
        )
        resp = s.call("Reset", s.stub.Reset, request)
        obs = np.asarray(resp.observation, dtype=np.float32).reshape(self.observation_space.shape)
        return obs, _info(resp.info)

    def step(self, action):
        s = self._session
        resp = s.call("Step", s.stub.Step, env_pb2.StepRequest(session_id=s.session_id, action=s.actions(action, 1)))
        obs = np.asarray(resp.observation, dtype=np.float32).reshape(self.observation_space.shape)
        return obs, float(resp.reward), bool(resp.terminated), bool(resp.truncated), _info(resp.info)

    def close(self):
        session = getattr(self, "_session", None)
        if session is not None:
            session.close()
            self._session = None
        super().close()


class AwareVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` applications (or provisioning copies) of one session, stepped in one round
    trip. Sub-environments share one episode clock, so they end and reset together; the reset
    follows Gymnasium's next-step autoreset."""

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        num_envs: int = 1,
        env_id: str = "aware/Autoscale-v0",
        address: str = "127.0.0.1:50051",
        token: Optional[str] = None,
        timeout: float = 60.0,
        tls_ca: Optional[Union[str, bytes]] = None,
        render_mode: Optional[str] = None,
        **config: Any,
    ):
        if render_mode is not None:
            raise ValueError(f"render_mode {render_mode!r}: aware environments do not render")
        self.render_mode = None
        self._session = _Session(env_id, address, token, int(num_envs), config, timeout, tls_ca)
        self.num_envs = self._session.num_envs
        self.single_observation_space = self._session.observation_space
        self.single_action_space = self._session.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = False
        self._np_random, self._np_random_seed = seeding.np_random(None)

    @property
    def session_id(self) -> str:
        return self._session.session_id

    def _infos(self, infos: Sequence[env_pb2.Info]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in env_pb2.Info.DESCRIPTOR.fields:
            out[f.name] = np.array([getattr(i, f.name) for i in infos])
            out["_" + f.name] = np.ones(self.num_envs, dtype=np.bool_)
        return out

    def _obs(self, flat) -> np.ndarray:
        return np.asarray(flat, dtype=np.float32).reshape(self.observation_space.shape)

    def _reset(self, seed: Optional[int], options: Optional[dict]):
        s = self._session
        request = env_pb2.ResetRequest(
            session_id=s.session_id,
            seed=_seed_from(self.np_random) if seed is None else int(seed),
            options={str(k): str(v) for k, v in (options or {}).items()},
        )
        resp = s.call("ResetMany", s.stub.ResetMany, request)
        self._autoreset = False
        return self._obs(resp.observations), self._infos(resp.infos)

    def reset(self, *, seed: Optional[Union[int, Sequence[int]]] = None, options: Optional[dict] = None):
        """Resets every sub-environment. A list of seeds is accepted for Gymnasium's API; the
        sub-environments share one clock and one seed, the first."""
        if seed is not None and not isinstance(seed, (int, np.integer)):
            seed = list(seed)[0] if len(seed) else None
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
        return self._reset(None if seed is None else int(seed), options)

    def step(self, actions):
        if self._autoreset:
            obs, info = self._reset(None, None)
            zeros = np.zeros(self.num_envs, dtype=np.bool_)
            return obs, np.zeros(self.num_envs, dtype=np.float64), zeros, zeros.copy(), info
        s = self._session
        request = env_pb2.StepManyRequest(session_id=s.session_id, actions=s.actions(actions, self.num_envs))
        resp = s.call("StepMany", s.stub.StepMany, request)
        terminated = np.asarray(resp.terminated, dtype=np.bool_)
        truncated = np.asarray(resp.truncated, dtype=np.bool_)
        self._autoreset = bool(np.any(terminated | truncated))
        rewards = np.asarray(resp.rewards, dtype=np.float64)
        return self._obs(resp.observations), rewards, terminated, truncated, self._infos(resp.infos)

    def close_extras(self, **kwargs):
        session = getattr(self, "_session", None)
        if session is not None:
            session.close()
            self._session = None
