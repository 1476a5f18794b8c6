//! Integration test suites live in `[[test]]` targets.
