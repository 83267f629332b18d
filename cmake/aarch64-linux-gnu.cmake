# Cross build for arm64 with Debian's gcc-aarch64-linux-gnu (make
# check-arm64).  Libraries come from Debian's multiarch arm64 packages
# (libcmocka-dev:arm64); pkg-config looks only there, so no host (x86-64)
# package is ever picked up.  Tests run under qemu-aarch64-static.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR}
    /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# The arm64 loader and libraries lie where Debian's multiarch packages put
# them (/lib/ld-linux-aarch64.so.1, /usr/lib/aarch64-linux-gnu), so the
# emulator needs no -L.  CPUHOG_EMULATOR tells the tests what they run
# under (harness.h, t_qemu_user()); CPUHOG_TEST_SLOW, the tests' one
# slowness knob, how much longer their timeouts wait (it translates every
# instruction: 10).
set(CMAKE_CROSSCOMPILING_EMULATOR env CPUHOG_EMULATOR=qemu-user
    CPUHOG_TEST_SLOW=10 qemu-aarch64-static)
