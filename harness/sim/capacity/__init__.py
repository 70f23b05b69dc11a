"""The simulator's capacity model: the KV pool, the prefix cache, admission and retraction.

settings  what the engine's capacity model takes from SGLang's arguments
kvpool    the KV pool in tokens, shared by the radix tree and requests
radix     the prefix cache over token ids
hicache   HiCache's host tier
tokens    stable token ids for prompts
policy    SGLang's admission (new_token_ratio reservation) and retraction rules
"""
