"""The run-time Jobs that `make stage/build/bench` render and apply (on one skeleton, `job.ScriptJob`); their
static parts (service accounts, roles, shipped code) are applied by `cdk deploy`."""
