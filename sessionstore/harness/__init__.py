"""The harness toolkit: output contracts judged on logs."""
