//! Choosing the adapter a process opens: `Gpu::adapters` lists them,
//! `Gpu::init_on(i)` or `VOLTA_ADAPTER=i` opens one, and an index past the list
//! is a typed error. The GPU opens once per process, so each case runs in a child
//! process (this test binary, running only the ignored test below).
#![cfg(feature = "gpu")]

use std::process::Command;
use volta::backend::gpu::GpuError;
use volta::prelude::*;

/// Set in the child's environment: which case it runs.
const CASE: &str = "VOLTA_ADAPTER_CASE";

#[test]
#[ignore = "run in a child process by each_case_opens_the_adapter_it_asks_for"]
fn child() {
    let case = std::env::var(CASE).expect("run by its parent test only");
    let adapters = Gpu::adapters();
    assert!(!adapters.is_empty(), "no adapter listed");
    assert_eq!(adapters[0].index, 0);
    match case.as_str() {
        "init_on" => {
            let info = Gpu::init_on(0).expect("adapter 0 opens");
            assert_eq!(info.name, adapters[0].name);
            // Asking again for the open adapter is fine; another one is an error.
            assert_eq!(Gpu::init_on(0).unwrap().name, info.name);
            if adapters.len() == 1 {
                assert_eq!(
                    Gpu::init_on(1).unwrap_err(),
                    GpuError::Unsupported(
                        "the GPU is already open on adapter 0: call Gpu::init_on(1) before the first Gpu op"
                            .into()
                    )
                );
            }
            let x = Tensor::<Rank1<3>, Gpu>::from_vec(vec![1.0, -2.0, 3.0]).unwrap();
            assert_eq!(x.relu().to_vec(), vec![1.0, 0.0, 3.0]);
        }
        "env" => {
            // VOLTA_ADAPTER=0 in the environment: `init` opens adapter 0.
            assert_eq!(Gpu::init().unwrap().name, adapters[0].name);
        }
        "past_the_list" => {
            let n = adapters.len();
            let err = Gpu::init_on(n).unwrap_err();
            assert_eq!(err, GpuError::NoSuchAdapter { index: n, count: n });
            assert!(err.to_string().contains("Gpu::adapters()"), "{err}");
            // The failure is the process's answer from then on.
            assert_eq!(Gpu::init().unwrap_err(), err);
        }
        other => panic!("unknown case {other}"),
    }
}

#[test]
fn each_case_opens_the_adapter_it_asks_for() {
    let exe = std::env::current_exe().expect("the test binary's path");
    for (case, env) in [
        ("init_on", None),
        ("env", Some("0")),
        ("past_the_list", None),
    ] {
        let mut child = Command::new(&exe);
        child
            .args([
                "--ignored",
                "--exact",
                "--nocapture",
                "adapter_choice::child",
            ])
            .env(CASE, case)
            .env_remove("VOLTA_ADAPTER");
        if let Some(v) = env {
            child.env("VOLTA_ADAPTER", v);
        }
        let out = child.output().expect("the child test runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "case {case}: the child failed\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
