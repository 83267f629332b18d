# Run at install time, after the library is in place.  A program linked
# against libcpuhog.so finds it at run time only where ld.so looks: in
# its cache of the system's library folders, or along a run path.  So:
# into a folder ld.so searches, as root, refresh the cache (ldconfig);
# anywhere else, say the one flag a program's link needs.  Not for a
# staged install (DESTDIR): the package's own scripts do that.
# In: CPUHOG_LIBDIR, the libdir relative to the prefix.
set(dir "${CMAKE_INSTALL_PREFIX}/${CPUHOG_LIBDIR}")
if(NOT IS_ABSOLUTE "${dir}")
  get_filename_component(dir "${dir}" ABSOLUTE)
endif()
if(NOT "$ENV{DESTDIR}" STREQUAL "")
  return()
endif()
find_program(CPUHOG_LDCONFIG ldconfig PATHS /sbin /usr/sbin)
set(searched "")
if(CPUHOG_LDCONFIG)
  # -N -v: the folders it would scan, one "DIR: (from ...)" line each,
  # without touching the cache
  execute_process(COMMAND ${CPUHOG_LDCONFIG} -N -v OUTPUT_VARIABLE out
                  ERROR_QUIET RESULT_VARIABLE rc)
  string(REGEX MATCHALL "(^|\n)/[^:\n]*:" found "${out}")
  foreach(line ${found})
    string(REGEX REPLACE "^\n|:$" "" d "${line}")
    file(REAL_PATH "${d}" d)
    list(APPEND searched "${d}")
  endforeach()
endif()
file(REAL_PATH "${dir}" real)
list(FIND searched "${real}" at)
execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET)
if(at GREATER -1 AND uid STREQUAL "0")
  execute_process(COMMAND ${CPUHOG_LDCONFIG})
  message(STATUS "ldconfig: ${dir} is in ld.so's cache")
elseif(at GREATER -1)
  message(STATUS "${dir} is searched by ld.so: run ldconfig as root")
else()
  message(STATUS "${dir} is not searched by ld.so: link programs with "
                 "-Wl,-rpath,${dir} (or run them with LD_LIBRARY_PATH=${dir})")
endif()
