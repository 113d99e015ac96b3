"""AWS plumbing shared by every layer that calls AWS at run time: bounded boto3 clients, the account lookup, the
bucket check. A leaf: it reads only config/'s vocabulary, and rendering (charts, stacks) never imports it."""
