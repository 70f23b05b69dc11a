"""SGLang's facts per version: a leaf that the command, the checks and the simulator all read.

It imports nothing of the project, so the harness and the simulator can both read it without
reading each other.

surfaces     the flag surfaces per version: flag names and accepted values, endpoints, the
             ready line, the flush's texts; which surface a parser speaks
speculative  the speculative rules: the EAGLE family, the forced draft tokens, the request cap
             with speculation, refusals at start-up
graphs       the decode CUDA graphs: the batch sizes captured per GPU and flags, the captured
             size a batch pads to, eager above the largest
paging       the KV page size: SGLang's default per GPU and the MLA backends that force page 64
attention    the attention backend SGLang picks when none is given, per version, and its line
memory       the GPU memory defaults: mem_fraction_static when unset, the multimodal KV
             reservation, the "no GPU memory for the KV cache" refusal, per architecture
host_memory  what SGLang holds in host memory: the checkpoint files it loads (through the page
             cache) and the HiCache host pool, per rank, beside a 10 GiB reserve
adaptive     adaptive speculative decoding: SGLang's built-in step policy and the schema of an
             --speculative-adaptive-config file
"""
