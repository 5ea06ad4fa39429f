# Tidemark's library dependencies as imported targets with full paths, found the same way
# by Tidemark's own build (CMakeLists.txt) and by the installed package
# (TidemarkConfig.cmake): liburing, liblz4, and CAF 0.17's caf_core and caf_io (CAF ships
# neither a CMake package nor a pkg-config file). Each is found by its header and library
# (the cache entries TIDEMARK_<NAME>_INCLUDE_DIR and TIDEMARK_<NAME>_LIBRARY may name
# others). Defines TidemarkDeps::uring, TidemarkDeps::lz4, TidemarkDeps::caf_core and
# TidemarkDeps::caf_io; sets TIDEMARK_MISSING_DEPENDENCY to a message naming the first
# dependency not found (empty when all are there). The includer decides what that means.
set(TIDEMARK_MISSING_DEPENDENCY "")

# TidemarkDeps::<name> from <header> and lib<library>, or TIDEMARK_MISSING_DEPENDENCY.
function(_tidemark_dependency name header library package)
  string(TOUPPER "${name}" upper)
  set(dir_var TIDEMARK_${upper}_INCLUDE_DIR)
  set(lib_var TIDEMARK_${upper}_LIBRARY)
  find_path(${dir_var} ${header})
  find_library(${lib_var} ${library})
  if(NOT EXISTS "${${dir_var}}/${header}")
    set(missing "${header} not found (${dir_var} is \"${${dir_var}}\")")
  elseif(NOT EXISTS "${${lib_var}}")
    set(missing "lib${library} not found (${lib_var} is \"${${lib_var}}\")")
  endif()
  if(missing)
    if(NOT TIDEMARK_MISSING_DEPENDENCY)
      set(TIDEMARK_MISSING_DEPENDENCY
          "Tidemark needs lib${library} and ${header} (Debian package ${package}): ${missing}"
          PARENT_SCOPE)
    endif()
  elseif(NOT TARGET TidemarkDeps::${name})
    add_library(TidemarkDeps::${name} UNKNOWN IMPORTED)
    set_target_properties(TidemarkDeps::${name} PROPERTIES
      IMPORTED_LOCATION "${${lib_var}}" INTERFACE_INCLUDE_DIRECTORIES "${${dir_var}}")
  endif()
endfunction()

_tidemark_dependency(uring liburing.h uring liburing-dev)
_tidemark_dependency(lz4 lz4.h lz4 liblz4-dev)
_tidemark_dependency(caf_core caf/config.hpp caf_core libcaf-dev)
_tidemark_dependency(caf_io caf/io/all.hpp caf_io libcaf-dev)

# CAF's API changed after 0.17: another version is as good as none.
if(NOT TIDEMARK_MISSING_DEPENDENCY)
  file(STRINGS "${TIDEMARK_CAF_CORE_INCLUDE_DIR}/caf/config.hpp" _tidemark_caf_version
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+$" _tidemark_caf_version "${_tidemark_caf_version}")
  if(NOT _tidemark_caf_version OR _tidemark_caf_version LESS 1700
     OR NOT _tidemark_caf_version LESS 1800)
    string(CONCAT TIDEMARK_MISSING_DEPENDENCY
           "Tidemark needs CAF 0.17 (Debian package libcaf-dev): "
           "${TIDEMARK_CAF_CORE_INCLUDE_DIR}/caf/config.hpp has CAF_VERSION "
           "\"${_tidemark_caf_version}\" (0.17.x is 17xx)")
  endif()
  unset(_tidemark_caf_version)
endif()
