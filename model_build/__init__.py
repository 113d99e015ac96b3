"""Compile fused NxDI artifacts once, publish them content-addressed, and let serving verify what it loads."""
