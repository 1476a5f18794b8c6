// `requantize IN.gguf OUT.gguf`: IN requantised to llama.cpp's Q4_K_M mix by
// llama.cpp's own quantiser, exactly as `llama-quantize --allow-requantize IN OUT
// Q4_K_M` does it (that tool parses its flags into these parameters and makes this
// one call), so the file is one people get from llama.cpp.
#include <stdio.h>

#include "llama.h"

int main(int argc, char ** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.gguf OUT.gguf (requantises IN to Q4_K_M)\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    llama_model_quantize_params params = llama_model_quantize_default_params();
    params.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
    params.allow_requantize = true;
    const uint32_t failed = llama_model_quantize(argv[1], argv[2], &params);
    llama_backend_free();
    if (failed) {
        fprintf(stderr, "requantize: llama.cpp could not quantise %s\n", argv[1]);
        return 1;
    }
    return 0;
}
