"""TorchTPU's unstable namespace, for code written against it."""
