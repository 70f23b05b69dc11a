"""The prompt type and loader, where the harness has always imported them from
(`harness.workload` holds the workloads themselves)."""

from harness.workload import BUILTIN, Prompt, load_prompts

__all__ = ["BUILTIN", "Prompt", "load_prompts"]
