// Glue between the generated per-kernel trampolines and the fiber runtime.
// Included by the generated translation units after the kernel source.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace emu {

/// Filled by a failed launch; mirrored by `LaunchError` in src/kernels.rs.
struct LaunchError {
    int code;             // a CUresult value
    uint64_t fault_addr;  // host address of an invalid access, or 0
    char msg[512];
};

void set_error(LaunchError* e, int code, const char* fmt, ...) __attribute__((format(__printf__, 3, 4)));

/// Runs `body` once per GPU thread of the grid `dims` (grid x,y,z, block x,y,z).
int run_grid(const char* name, const std::function<void()>& body, const unsigned* dims, LaunchError* e);

}  // namespace emu

// Implemented in Rust (src/memory.rs): device address -> host address of the
// launching device's live allocation, or an error message.
extern "C" int devtensor_emu_translate(uint64_t addr, void** host, char* msg, size_t msg_len);

namespace emu {

template <class T>
int unpack_one(const char* name, void* param, T& out, unsigned idx, LaunchError* e) {
    if constexpr (std::is_pointer<T>::value) {
        uint64_t addr;
        std::memcpy(&addr, param, sizeof(addr));
        void* host = nullptr;
        char msg[256];
        if (devtensor_emu_translate(addr, &host, msg, sizeof(msg)) != 0) {
            set_error(e, 1 /* CUDA_ERROR_INVALID_VALUE */, "kernel %s, argument %u: %s", name, idx, msg);
            return 1;
        }
        out = static_cast<T>(host);
    } else {
        static_assert(std::is_arithmetic<T>::value,
                      "kernel parameters must be scalars or pointers (no structs by value)");
        std::memcpy(&out, param, sizeof(T));
    }
    return 0;
}

template <class Tuple, std::size_t... I>
int unpack_all(const char* name, void** params, Tuple& t, LaunchError* e, std::index_sequence<I...>) {
    int rc = 0;
    ((rc = rc ? rc : unpack_one(name, params[I], std::get<I>(t), static_cast<unsigned>(I), e)), ...);
    return rc;
}

template <class... A>
int launch(const char* name, void (*kernel)(A...), void** params, const unsigned* dims, LaunchError* e) {
    std::tuple<typename std::remove_cv<A>::type...> args;
    if (sizeof...(A) > 0 && params == nullptr) {
        set_error(e, 1, "kernel %s takes %u arguments but kernelParams is null", name, unsigned(sizeof...(A)));
        return 1;
    }
    if (int rc = unpack_all(name, params, args, e, std::index_sequence_for<A...>{})) return rc;
    const std::function<void()> body = [&]() { std::apply(kernel, args); };
    return run_grid(name, body, dims, e);
}

template <class... A>
constexpr unsigned param_count(void (*)(A...)) {
    return sizeof...(A);
}

/// Byte size of each parameter, then whether it is a device pointer (1) or a scalar (0).
template <class... A>
const uint32_t* param_layout(void (*)(A...)) {
    static const uint32_t layout[] = {static_cast<uint32_t>(sizeof(A))...,
                                      static_cast<uint32_t>(std::is_pointer<A>::value)..., 0};
    return layout;
}

}  // namespace emu
