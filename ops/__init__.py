"""What runs at deploy time, on the deployer's machine: the drivers behind `make stage`, `make build`,
`make bench` and the teardown sweep. They call kubectl, STS, S3, EC2, ELB, CloudFormation and CloudWatch Logs.
Rendering (charts, stacks) runs nothing and calls no AWS API; model_build and bench do call S3, STS and
CloudWatch, through cloud/aws.py, but inside the Jobs these drivers start or from the command line, and never
reach the cluster with kubectl."""
