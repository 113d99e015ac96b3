"""What runs at deploy time, on the deployer's machine: the drivers behind `make stage`, `make build`,
`make bench` and the teardown sweep. They call kubectl, STS and S3; the layers below (config, charts,
stacks, model_build) render or build and never reach the cluster or AWS themselves."""
