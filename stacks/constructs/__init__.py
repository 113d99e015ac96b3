"""Reusable CDK constructs, one concept per file."""
