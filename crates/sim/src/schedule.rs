//! Placing pods on nodes in O(log n): kube-scheduler's `NodeResourcesFit` filter (the node has
//! room for the pod's requests) and its `LeastAllocated` score (the mean free fraction of CPU
//! and memory after placing; on identical nodes the same order as the free fraction before
//! placing), kept in a segment tree so that a cluster of a million pods schedules in
//! O(pods · log nodes) instead of scanning every node for every pod.

/// Segment tree over nodes: per subtree the largest free CPU, the largest free memory and the
/// best score, so a search skips every subtree where nothing fits or nothing scores better.
#[derive(Debug, Clone, Default)]
pub struct NodeIndex {
    size: usize,
    free_cpu_m: Vec<i64>,
    free_memory: Vec<i64>,
    score: Vec<f64>,
}

impl NodeIndex {
    /// `nodes` empty nodes of equal capacity.
    pub fn new(nodes: usize, cpu_m: i64, memory: i64) -> Self {
        let size = nodes.next_power_of_two().max(1);
        let mut idx = NodeIndex {
            size,
            free_cpu_m: vec![-1; 2 * size],
            free_memory: vec![-1; 2 * size],
            score: vec![f64::NEG_INFINITY; 2 * size],
        };
        for i in 0..nodes {
            idx.free_cpu_m[size + i] = cpu_m;
            idx.free_memory[size + i] = memory;
            idx.score[size + i] = 2.0;
        }
        for v in (1..size).rev() {
            idx.pull(v);
        }
        idx
    }

    fn pull(&mut self, v: usize) {
        let (l, r) = (2 * v, 2 * v + 1);
        self.free_cpu_m[v] = self.free_cpu_m[l].max(self.free_cpu_m[r]);
        self.free_memory[v] = self.free_memory[l].max(self.free_memory[r]);
        self.score[v] = self.score[l].max(self.score[r]);
    }

    /// Records node `i`'s free resources and its LeastAllocated score.
    pub fn set(&mut self, i: usize, free_cpu_m: i64, free_memory: i64, score: f64) {
        let mut v = self.size + i;
        self.free_cpu_m[v] = free_cpu_m;
        self.free_memory[v] = free_memory;
        self.score[v] = score;
        while v > 1 {
            v /= 2;
            self.pull(v);
        }
    }

    /// The best-scoring node with room for the request (lowest index among equals).
    pub fn best_fit(&self, cpu_m: i64, memory: i64) -> Option<usize> {
        let mut best: Option<(f64, usize)> = None;
        let mut stack = vec![1usize];
        while let Some(v) = stack.pop() {
            if self.free_cpu_m[v] < cpu_m || self.free_memory[v] < memory {
                continue;
            }
            if best.is_some_and(|(s, _)| self.score[v] <= s) {
                continue;
            }
            if v >= self.size {
                best = Some((self.score[v], v - self.size));
                continue;
            }
            let (l, r) = (2 * v, 2 * v + 1);
            // Visit the more promising child first (the left one on ties).
            if self.score[r] > self.score[l] {
                stack.push(l);
                stack.push(r);
            } else {
                stack.push(r);
                stack.push(l);
            }
        }
        best.map(|(_, i)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_least_allocated_node_that_fits() {
        let mut idx = NodeIndex::new(5, 1000, 1000);
        idx.set(0, 100, 900, 1.0);
        idx.set(1, 600, 600, 1.2);
        idx.set(2, 900, 50, 0.95);
        idx.set(3, 300, 300, 0.6);
        idx.set(4, 0, 0, 0.0);
        assert_eq!(idx.best_fit(200, 200), Some(1));
        assert_eq!(idx.best_fit(700, 10), Some(2));
        assert_eq!(idx.best_fit(950, 10), None);
        // Matches a linear scan on random states.
        let mut state = 12345u64;
        let mut rnd = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as i64
        };
        let n = 37;
        let mut idx = NodeIndex::new(n, 1000, 1000);
        let mut nodes = vec![(1000i64, 1000i64); n];
        for _ in 0..500 {
            let i = rnd() as usize % n;
            nodes[i] = (rnd() % 1001, rnd() % 1001);
            let (c, m) = nodes[i];
            idx.set(i, c, m, (c + m) as f64 / 1000.0);
            let (rc, rm) = (rnd() % 600, rnd() % 600);
            let want = nodes
                .iter()
                .enumerate()
                .filter(|(_, (c, m))| *c >= rc && *m >= rm)
                .fold(None::<(i64, usize)>, |b, (j, &(c, m))| match b {
                    Some((s, _)) if s >= c + m => b,
                    _ => Some((c + m, j)),
                })
                .map(|(_, j)| j);
            assert_eq!(idx.best_fit(rc, rm), want);
        }
    }
}
