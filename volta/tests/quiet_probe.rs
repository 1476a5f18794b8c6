//! Opening the GPU prints nothing a user cannot act on. On Linux, Mesa's
//! device-selection layer (installed with lavapipe and Mesa's other Vulkan
//! drivers) probes for a Wayland display, and where no session exists libwayland
//! prints `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` once
//! per instance. Each case opens the GPU in a child process (this test binary,
//! running only the ignored test below) with such an environment.
#![cfg(feature = "gpu")]

use std::process::Command;
use volta::prelude::*;

/// Set in the child's environment: the ignored test below runs only there.
const CHILD: &str = "VOLTA_QUIET_PROBE_CHILD";

#[test]
#[ignore = "run in a child process by opening_the_gpu_without_a_session_prints_no_error"]
fn opens_the_gpu_and_computes() {
    assert!(
        std::env::var_os(CHILD).is_some(),
        "run by its parent test only"
    );
    let x = Tensor::<Rank1<3>, Gpu>::from_vec(vec![1.0, -2.0, 3.0]).expect("a GPU");
    assert_eq!(x.relu().to_vec(), vec![1.0, 0.0, 3.0]);
}

#[test]
fn opening_the_gpu_without_a_session_prints_no_error() {
    let exe = std::env::current_exe().expect("the test binary's path");
    // No runtime dir at all, and one libwayland rejects (it must be absolute).
    for xdg in [None, Some(".")] {
        let mut child = Command::new(&exe);
        child
            .args(["--ignored", "--exact", "--nocapture"])
            .arg("quiet_probe::opens_the_gpu_and_computes")
            .env(CHILD, "1")
            .env_remove("NODEVICE_SELECT")
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("WAYLAND_SOCKET");
        match xdg {
            None => child.env_remove("XDG_RUNTIME_DIR"),
            Some(dir) => child.env("XDG_RUNTIME_DIR", dir),
        };
        let out = child.output().expect("the child test runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "XDG_RUNTIME_DIR={xdg:?}: the child failed\n{stdout}\n{stderr}"
        );
        assert!(
            !stderr.contains("XDG_RUNTIME_DIR") && !stdout.contains("XDG_RUNTIME_DIR"),
            "XDG_RUNTIME_DIR={xdg:?}: opening the GPU printed\n{stderr}"
        );
    }
}
