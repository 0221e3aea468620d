//! The validation checks themselves, on a few configurations (the full sets run in
//! `aware validate-sim`).

use aware_sim::validate::{draw_random_cases, mmc_analytic, run_mmc_case, run_random_case};

#[test]
fn mmc_cases_agree_with_erlang_c_in_both_modes() {
    for (c, rho, mu) in [(1u32, 0.5, 20.0), (16, 0.85, 30.0)] {
        let lambda = rho * c as f64 * mu;
        let case = run_mmc_case(c, lambda, mu, 3);
        let (mean, p99) = mmc_analytic(c, lambda, mu);
        assert!(case.checked && case.pass, "{case:?}");
        assert!(
            (case.analytic_mean_ms - mean * 1000.0).abs() < 1e-9 && (case.analytic_p99_ms - p99 * 1000.0).abs() < 1e-9
        );
    }
}

#[test]
fn a_drawn_overload_case_agrees_and_serves_far_below_capacity() {
    let case = &draw_random_cases(11, 1)[0];
    let r = run_random_case(case, 11);
    assert!(r.pass, "{r:?}");
    // Processor sharing with impatient requests collapses in overload: both modes serve well
    // under the offered load.
    assert!(r.discrete_event.served_fraction < 0.9 && r.fast.served_fraction < 0.9, "{r:?}");
}
