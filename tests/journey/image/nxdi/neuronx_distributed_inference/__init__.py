"""A stand-in for NxDI (neuronx-distributed-inference v0.6.10598, in the legacy-v0 serving image), for the journey's
build Job: the classes and calls model_build/compile.py makes, each taking what the pinned release takes (the
keyword arguments tests/model_build/fixtures/nxdi_v0_6_10598.json records from its source), and a compile that writes
the files that release writes (application_base.py:220-284 at the tag: neuron_config.json, model.pt and
weights/tp{rank}_sharded_checkpoint.safetensors with save_sharded_checkpoint) with small seeded bytes. It lives in the
journey's stand-in for the serving image only, never on the path of our own code."""
