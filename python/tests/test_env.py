"""The Python package against a real ``aware serve-env`` (plain ``python -m unittest``).

The binary is ``$AWARE_BIN`` or ``target/debug/aware`` of this repository; the server listens on a
free loopback port (``--listen 127.0.0.1:0``; the port is read from its stderr line).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest
import warnings

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

import aware_gym
from aware_gym import AuthenticationError, InvalidRequestError, NeedsResetError

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = "py-test-token"
SERVER: dict = {}


def setUpModule():
    binary = os.environ.get("AWARE_BIN") or str(ROOT / "target" / "debug" / "aware")
    if not os.path.exists(binary):
        raise RuntimeError(f"{binary}: not built; run `cargo build -p aware-cli` or set AWARE_BIN")
    tmp = tempfile.mkdtemp(prefix="aware-gym-test-")
    # Removed however the module ends, a failed set-up included (tearDownModule is then skipped).
    unittest.addModuleCleanup(shutil.rmtree, tmp, ignore_errors=True)
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(f"  {TOKEN}\n\n")  # surrounding whitespace is trimmed
    proc = subprocess.Popen(
        [binary, "serve-env", "--listen", "127.0.0.1:0", "--token-file", token_file, "--max-sessions", "32"],
        stderr=subprocess.PIPE,
        text=True,
    )
    found = {}

    def read_port():
        for line in proc.stderr:
            m = re.search(r"listening on (\S+)", line)
            if m:
                found["address"] = m.group(1)
                break

    reader = threading.Thread(target=read_port, daemon=True)
    reader.start()
    reader.join(timeout=60)
    if "address" not in found:
        proc.kill()
        raise RuntimeError("aware serve-env did not report its address within 60 s")
    SERVER.update(proc=proc, address=found["address"])


def tearDownModule():
    proc = SERVER.get("proc")
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        if code != 0:
            raise RuntimeError(f"aware serve-env exited {code} on SIGTERM (expected a graceful 0)")


def kwargs(**extra):
    return dict(address=SERVER["address"], token=TOKEN, **extra)


class CheckEnv(unittest.TestCase):
    def check(self, env_id, **config):
        env = gym.make(env_id, **kwargs(**config))
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                # Includes reset determinism with a seed and step determinism.
                check_env(env.unwrapped, skip_render_check=True)
            messages = [str(w.message) for w in caught if "render" not in str(w.message).lower()]
            self.assertEqual(messages, [], f"{env_id}: check_env warned")
        finally:
            env.close()

    def test_autoscale_passes_check_env(self):
        self.check("aware/Autoscale-v0", episode_steps=20, seed=3)

    def test_discrete_autoscale_passes_check_env(self):
        self.check("aware/AutoscaleDiscrete-v0", episode_steps=20)

    def test_provisioning_passes_check_env(self):
        self.check("aware/Provisioning-v0", days=2, episode_steps=20)


class SingleEnv(unittest.TestCase):
    def setUp(self):
        self.env = gym.make("aware/Autoscale-v0", **kwargs(episode_steps=4))

    def tearDown(self):
        self.env.close()

    def test_spaces_and_types(self):
        self.assertIsInstance(self.env.unwrapped, aware_gym.AwareEnv)
        self.assertEqual(self.env.observation_space.shape, (11,))
        self.assertEqual(self.env.observation_space.dtype, np.float32)
        self.assertEqual(self.env.action_space.shape, (3,))
        obs, info = self.env.reset(seed=7)
        self.assertEqual(obs.dtype, np.float32)
        self.assertIn(obs, self.env.observation_space)
        self.assertIn("cpu_utilisation", info)
        obs, reward, terminated, truncated, info = self.env.step(np.zeros(3, dtype=np.float32))
        self.assertIsInstance(reward, float)
        self.assertFalse(terminated)
        self.assertIn("slo_violated", info)
        # A state whose utilisation was carried, not measured, says so (learn nothing from it).
        self.assertIs(info["usage_carried"], False)

    def test_seeded_resets_repeat_and_differ(self):
        a, _ = self.env.reset(seed=5)
        b, _ = self.env.reset(seed=5)
        steps_a = [self.env.step(np.full(3, 0.5, dtype=np.float32))[0] for _ in range(3)]
        self.env.reset(seed=5)
        steps_b = [self.env.step(np.full(3, 0.5, dtype=np.float32))[0] for _ in range(3)]
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.array(steps_a), np.array(steps_b))
        self.env.reset(seed=6)
        steps_c = [self.env.step(np.full(3, 0.5, dtype=np.float32))[0] for _ in range(3)]
        self.assertFalse(np.array_equal(np.array(steps_a), np.array(steps_c)))

    def test_episode_truncates_then_needs_reset(self):
        env = self.env.unwrapped
        env.reset(seed=1)
        truncated = [env.step(np.zeros(3, dtype=np.float32))[3] for _ in range(4)]
        self.assertEqual(truncated, [False, False, False, True])
        with self.assertRaises(NeedsResetError) as ctx:
            env.step(np.zeros(3, dtype=np.float32))
        self.assertIn("FAILED_PRECONDITION", str(ctx.exception))

    def test_bad_actions_raise_typed_errors(self):
        env = self.env.unwrapped
        env.reset(seed=1)
        for action, says in [
            (np.array([0.0, np.nan, 0.0], dtype=np.float32), "NaN is not in the action space"),
            (np.array([0.0, 2.0, 0.0], dtype=np.float32), "2 is not in the action space"),
            (np.zeros(4, dtype=np.float32), "expected 3 values"),
        ]:
            with self.assertRaises(InvalidRequestError) as ctx:
                env.step(action)
            self.assertIn("INVALID_ARGUMENT", str(ctx.exception))
            self.assertIn(says, str(ctx.exception))
        # Gymnasium refuses negative seeds itself; the server would too (INVALID_ARGUMENT).
        with self.assertRaises(gym.error.Error):
            env.reset(seed=-1)
        # The session still works.
        env.step(np.zeros(3, dtype=np.float32))


class Auth(unittest.TestCase):
    def test_wrong_token_is_unauthenticated(self):
        with self.assertRaises(AuthenticationError) as ctx:
            gym.make("aware/Autoscale-v0", address=SERVER["address"], token="not-the-token")
        self.assertIn("UNAUTHENTICATED", str(ctx.exception))

    def test_missing_token_is_unauthenticated(self):
        with self.assertRaises(AuthenticationError) as ctx:
            gym.make("aware/Provisioning-v0", address=SERVER["address"])
        self.assertIn("UNAUTHENTICATED", str(ctx.exception))

    def test_unknown_config_key_is_refused(self):
        with self.assertRaises(TypeError):
            gym.make("aware/Autoscale-v0", **kwargs(apps=3))


class Vector(unittest.TestCase):
    def test_steps_64_apps_per_call(self):
        envs = gym.make_vec(
            "aware/Autoscale-v0", num_envs=64, vectorization_mode="vector_entry_point", **kwargs(episode_steps=3)
        )
        try:
            self.assertIsInstance(envs, aware_gym.AwareVectorEnv)
            self.assertEqual(envs.num_envs, 64)
            obs, info = envs.reset(seed=1)
            self.assertEqual(obs.shape, (64, 11))
            self.assertEqual(info["replicas"].shape, (64,))
            envs.action_space.seed(0)
            for t in range(3):
                obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
                self.assertEqual(obs.shape, (64, 11))
                self.assertEqual(rewards.shape, (64,))
                self.assertEqual(bool(truncated.all()), t == 2)
            # Next-step autoreset: the step after the episode ended returns the reset state.
            obs, rewards, terminated, truncated, _ = envs.step(envs.action_space.sample())
            self.assertTrue(np.all(rewards == 0) and not truncated.any() and not terminated.any())
            self.assertIn(obs, envs.observation_space)
        finally:
            envs.close()

    def test_seeded_vector_resets_repeat(self):
        def run():
            envs = gym.make_vec(
                "aware/AutoscaleDiscrete-v0", num_envs=8, vectorization_mode="vector_entry_point", **kwargs()
            )
            try:
                first, _ = envs.reset(seed=3)
                step = envs.step(np.arange(8) % 7)
                return first, step[0], step[1]
            finally:
                envs.close()

        for a, b in zip(run(), run()):
            np.testing.assert_array_equal(a, b)

    def test_provisioning_vector(self):
        envs = gym.make_vec(
            "aware/Provisioning-v0", num_envs=4, vectorization_mode="vector_entry_point", **kwargs(days=2)
        )
        try:
            obs, _ = envs.reset(seed=2)
            self.assertEqual(obs.shape, (4, 5))
            obs, rewards, *_ = envs.step(np.array([0, 1, 2, 4]))
            self.assertEqual(rewards.shape, (4,))
        finally:
            envs.close()


if __name__ == "__main__":
    unittest.main()
