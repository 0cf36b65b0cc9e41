//! The overhead budget: probing may use at most a share of one core.
//!
//! Why it exists: the rule, after Pingmesh: when the probe thread
//! uses more CPU than the budget over an interval, the exporter steps its
//! rate down (each level doubles the interval, up to a maximum) but never
//! stops probing; when it uses under a quarter of the budget it steps back
//! up one level at a time.

use std::time::Duration;

/// The throttle state.
#[derive(Clone, Debug)]
pub struct Budget {
    base: Duration,
    max: Duration,
    fraction: f64,
    level: u32,
}

impl Budget {
    /// A budget of `fraction` of one core, probing every `base`, never
    /// slower than every `max`.
    pub fn new(base: Duration, max: Duration, fraction: f64) -> Budget {
        Budget {
            base,
            max: max.max(base),
            fraction,
            level: 0,
        }
    }

    /// The throttle level (0 = full rate).
    pub fn level(&self) -> u32 {
        self.level
    }

    /// The interval at the current level.
    pub fn interval(&self) -> Duration {
        let stretched = self.base.saturating_mul(1u32 << self.level.min(20));
        stretched.min(self.max)
    }

    /// Feeds the CPU one round of all probes used; returns the interval
    /// to wait before the next round.
    pub fn after_round(&mut self, cpu: Duration) -> Duration {
        let share = cpu.as_secs_f64() / self.interval().as_secs_f64();
        if share > self.fraction && self.interval() < self.max {
            self.level += 1;
        } else if share < self.fraction / 4.0 && self.level > 0 {
            self.level -= 1;
        }
        self.interval()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn over_budget_steps_down_but_never_stops() {
        let mut b = Budget::new(10 * S, 80 * S, 0.01);
        // 1 s of CPU per round is 10% of a 10 s interval: over budget.
        assert_eq!(b.after_round(S), 20 * S);
        assert_eq!(b.after_round(S), 40 * S);
        assert_eq!(b.after_round(S), 80 * S);
        // At the maximum: stays there, still probing.
        assert_eq!(b.after_round(S), 80 * S);
        assert_eq!(b.level(), 3);
    }

    #[test]
    fn under_a_quarter_of_the_budget_steps_back_up() {
        let mut b = Budget::new(10 * S, 80 * S, 0.01);
        b.after_round(S);
        b.after_round(S);
        assert_eq!(b.level(), 2);
        // 1 ms per 40 s is far under budget.
        assert_eq!(b.after_round(Duration::from_millis(1)), 20 * S);
        assert_eq!(b.after_round(Duration::from_millis(1)), 10 * S);
        assert_eq!(b.after_round(Duration::from_millis(1)), 10 * S);
        assert_eq!(b.level(), 0);
    }

    #[test]
    fn between_a_quarter_and_the_budget_holds() {
        let mut b = Budget::new(10 * S, 80 * S, 0.01);
        b.after_round(S);
        // 50 ms per 20 s = 0.25%: between 0.25% and 1%, hold.
        assert_eq!(b.after_round(Duration::from_millis(60)), 20 * S);
        assert_eq!(b.level(), 1);
    }
}
