//! The stages an application's learned policy goes through (AWARE, Algorithm 1), and the record
//! of a change between them.

use serde::{Deserialize, Serialize};

/// Where an application's learned policy stands. Names as in JSON, logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Not started yet.
    Initialized,
    /// Bootstrapping: the fallback (rule-based) autoscaler acts; the agent learns offline from
    /// its transitions.
    Offline,
    /// The agent acts. After bootstrapping it does not learn from its own transitions (unless
    /// `online_learning` is on); retraining (after SERVING degraded, or where the rules failed),
    /// a DDPG agent explores and learns from them online, a PPO agent clones them offline.
    Online,
    /// The agent acts greedily and does not learn; its rewards are watched.
    Serving,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Initialized, Stage::Offline, Stage::Online, Stage::Serving];

    /// Position in [`Stage::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Stage::Initialized => "initialized",
            Stage::Offline => "offline",
            Stage::Online => "online",
            Stage::Serving => "serving",
        }
    }

    /// Whether the learned policy (rather than the fallback) proposes the allocation.
    pub fn agent_acts(self) -> bool {
        matches!(self, Stage::Online | Stage::Serving)
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One stage change of one application, with the numbers that caused it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageChange {
    pub app: String,
    /// The interval (counted from the start of the run) at whose end the change happened.
    pub step: u64,
    pub from: Stage,
    pub to: Stage,
    pub reason: String,
}
