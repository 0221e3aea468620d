//! `aware explain`: the decision log of one application read back from the store the manager
//! recorded into — who acted, on what, what it set, what the guard said, and for the agent's
//! actions the state features that drove each dimension.

use aware_store::{DecisionQuery, StoreUrl};
use serde::Serialize;

use crate::LifecycleError;
use crate::decision::Decision;
use crate::record::{AGENT, RESIDUAL_AGENT};

/// Which decisions to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// The decision(s) of one interval.
    Step(u64),
    /// The last `k`, oldest first.
    Last(usize),
}

#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub store: String,
    pub app: String,
    pub decisions: Vec<Decision>,
}

/// Reads `app`'s decisions from the store at `url` (which must exist: explaining never creates
/// a store).
pub fn explain(url: &str, app: &str, query: Query) -> Result<Explanation, LifecycleError> {
    let parsed: StoreUrl = url.parse()?;
    let store = aware_store::open(&parsed, true)?;
    let q = match query {
        Query::Step(n) => DecisionQuery::Step(n),
        Query::Last(k) => DecisionQuery::Last(k),
    };
    let records = store.decisions(app, q)?;
    if records.is_empty() {
        // Say whether the app is unknown or only the step is.
        let any = store.decisions(app, DecisionQuery::Last(1))?;
        return Err(match (any.is_empty(), query) {
            (true, _) => {
                let mut apps: Vec<String> = store.stage_changes(None)?.into_iter().map(|c| c.app).collect();
                apps.dedup();
                apps.sort();
                apps.dedup();
                LifecycleError::input(
                    "--app",
                    format!(
                        "{app}: no decisions recorded in {url}{}",
                        if apps.is_empty() {
                            String::new()
                        } else {
                            format!(" (apps with decisions: {})", apps.join(", "))
                        }
                    ),
                )
            }
            (false, Query::Step(n)) => {
                LifecycleError::input("--step", format!("{app} has no decision recorded at step {n}"))
            }
            (false, Query::Last(_)) => LifecycleError::input("--last", "must be at least 1"),
        });
    }
    let decisions = records
        .into_iter()
        // The manager's records, whichever way its agent acted.
        .filter(|r| r.agent == AGENT || r.agent == RESIDUAL_AGENT)
        .map(|r| {
            // The store's step (records kept before steps went on from run to run hold the
            // run's own in their detail).
            serde_json::from_value::<Decision>(r.detail).map(|d| Decision { step: r.step, ..d }).map_err(|e| {
                LifecycleError::input("store", format!("{url}: decision of {app} at step {}: {e}", r.step))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Explanation { store: url.into(), app: app.into(), decisions })
}
