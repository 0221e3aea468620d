"""Gymnasium environments backed by aware's environment service (``aware serve-env``).

Importing this package registers ``aware/Autoscale-v0`` (continuous actions),
``aware/AutoscaleDiscrete-v0`` (seven discrete deltas) and ``aware/Provisioning-v0``::

    import gymnasium as gym
    import aware_gym  # noqa: F401  (registers the ids)

    env = gym.make("aware/Autoscale-v0", address="127.0.0.1:50051", token="...")
    envs = gym.make_vec("aware/Autoscale-v0", num_envs=64, vectorization_mode="vector_entry_point",
                        address="127.0.0.1:50051", token="...")
"""

import gymnasium as gym

from .env import AwareEnv, AwareVectorEnv
from .errors import (
    AuthenticationError,
    AwareEnvError,
    InvalidRequestError,
    NeedsResetError,
    ResourceExhaustedError,
    ServiceUnavailableError,
    SessionNotFoundError,
)

__all__ = [
    "ENV_IDS",
    "AwareEnv",
    "AwareVectorEnv",
    "AwareEnvError",
    "AuthenticationError",
    "InvalidRequestError",
    "NeedsResetError",
    "ResourceExhaustedError",
    "ServiceUnavailableError",
    "SessionNotFoundError",
]

__version__ = "0.1.0"

ENV_IDS = ("aware/Autoscale-v0", "aware/AutoscaleDiscrete-v0", "aware/Provisioning-v0")

for _id in ENV_IDS:
    if _id not in gym.registry:
        gym.register(
            id=_id,
            entry_point="aware_gym.env:AwareEnv",
            vector_entry_point="aware_gym.env:AwareVectorEnv",
            kwargs={"env_id": _id},
        )
