# Rebuilds SmolLM2-135M-Instruct.Q4_1.gguf's exact layout (header, metadata,
# tokenizer, tensor infos: the real file's first 1785664 bytes) with every weight
# byte pair 00 2C (f16 scales 0.0625, small finite weights): the same shapes and
# block types, so kernel timings match the real file's; the text does not.
import sys
hdr = open(sys.argv[1], 'rb').read()
size = 98362432
with open(sys.argv[2], 'wb') as f:
    f.write(hdr)
    f.write(b'\x00\x2c' * ((size - len(hdr)) // 2))
