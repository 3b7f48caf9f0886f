"""Where clusters run the benchmark: Kubernetes manifests for N pods x G
GPUs and the pod's entry. TensorFlow-free (standard library and PyYAML).

- kubernetes.py: the manifests as plain dicts (an Indexed Job with a
  headless Service, a Kubeflow TFJob, a JobSet), each pod's DNS name, and
  the checks of every name and the image against their grammars.
- k8s_cli.py: `official-bench-k8s`, the flags -> YAML on stdout.
- pod.py: the pod's command (`python3 -m official_bench.deploy.pod`): the
  environment Kubernetes gives a pod (JOB_COMPLETION_INDEX, TF_CONFIG) ->
  the node index and the run script it starts; as PID 1 it handles
  SIGTERM and SIGINT from its first line.
docs/kubernetes.md shows the whole flow.
"""
