"""Models by name from the Hugging Face Hub: `rostra serve OWNER/NAME[:QUANT]`, `rostra pull / ls / rm`.

- reference.py: what `OWNER/NAME[:QUANT]` (or `hf.co/OWNER/NAME[:QUANT]`) names;
- choice.py: which GGUF files of a repository make the model (the quantization, split parts, the projector);
- cache.py: huggingface_hub's cache layout (blobs, snapshots, refs), so every Hugging Face tool shares the files;
- download.py: one file, resumed with a Range request after an interruption and checked against its SHA-256;
- pull.py: a reference -> the files on disk (listing the repository, or the cache alone when offline);
- commands.py: the `pull`, `ls` and `rm` subcommands.

huggingface_hub lists the repository (its own client: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, proxies); rostra
downloads the files itself, because huggingface_hub 2.x restarts a download killed in another process from byte 0
and never checks what it wrote against the SHA-256 the Hub gives.
"""
