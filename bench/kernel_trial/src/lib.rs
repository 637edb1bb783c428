//! The windows' bisection (cost_models.kernels_numba.window) in Rust, for a measured comparison
//! with numba (BENCHMARKS.md §23). The model's formulas come from `model.rs`, printed by sympy's
//! Rust printer from cost_models/symbolic.py (bench/kernel_trial/run.py writes it).
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

mod model;

fn count(w: f64, u: &[f64], prob: &[f64], iota: f64, n_keys: f64) -> f64 {
    if w.is_infinite() {
        return if iota > 0.0 { f64::INFINITY } else { n_keys };
    }
    let mut s = 0.0;
    for j in 0..u.len() {
        s += model::distinct_part(w, u[j], prob[j], iota);
    }
    model::distinct_new(w, iota) + s
}

#[pyfunction]
fn window<'py>(
    py: Python<'py>,
    distinct: PyReadonlyArray1<'py, f64>,
    u: PyReadonlyArray1<'py, f64>,
    prob: PyReadonlyArray1<'py, f64>,
    iota: f64,
    n_keys: f64,
    full_tol: f64,
) -> Bound<'py, PyArray1<f64>> {
    let d = distinct.as_slice().unwrap();
    let (u, prob) = (u.as_slice().unwrap(), prob.as_slice().unwrap());
    let mut out = Vec::with_capacity(d.len());
    for &x in d {
        let r = if x >= 1.0 || x.is_nan() { x } else { 1.0 };
        let mut lo = r.ln();
        let mut hi = lo + 70.0;
        let mut reachable = count(hi.exp(), u, prob, iota, n_keys) >= r * (1.0 - full_tol);
        if iota <= 0.0 {
            reachable = reachable && r <= n_keys * (1.0 - full_tol);
        }
        for _ in 0..64 {
            let mid = (lo + hi) / 2.0;
            if count(mid.exp(), u, prob, iota, n_keys) < r {
                if mid == lo {
                    break;
                }
                lo = mid;
            } else {
                if mid == hi {
                    break;
                }
                hi = mid;
            }
        }
        out.push(if reachable { hi.exp() } else { f64::INFINITY });
    }
    out.into_pyarray(py)
}

#[pymodule]
fn cosine_kernel_trial(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(window, m)?)?;
    Ok(())
}
