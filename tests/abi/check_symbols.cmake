# check_symbols.cmake - the exported symbols of libomniccl are the ABI.
#
#   cmake -DLIB=libomniccl.so.1 -DGOLDEN=capi/abi/symbols.txt
#         -DHEADER=capi/include/omniccl/omniccl.h -DNM=nm -DREADELF=readelf
#         -DSONAME=libomniccl.so.1 -DVERSION_NODE=OMNICCL_1
#         -P check_symbols.cmake
#
# Checks, reporting every difference before failing:
#   1. the defined dynamic symbols (nm -D --defined-only), versions stripped,
#      equal the golden list GOLDEN exactly (nothing missing, nothing extra);
#   2. each carries the default version VERSION_NODE (name@@OMNICCL_1);
#   3. GOLDEN is sorted and names exactly the functions declared in HEADER;
#   4. the SONAME (readelf -d) is SONAME.
# After a deliberate ABI addition: declare it in omniccl.h, export it, and
# add its name to capi/abi/symbols.txt (keep it sorted). Removing or renaming
# a symbol needs a new ABI major.

foreach(_var LIB GOLDEN HEADER NM READELF SONAME VERSION_NODE)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "check_symbols.cmake: -D${_var}=... is required")
  endif()
endforeach()

set(_errors "")
macro(_fail text)
  string(APPEND _errors "${text}\n")
endmacro()

# Names in `a` but not in `b`, in `out`.
function(_minus out a b)
  set(_r ${${a}})
  if(NOT "${${b}}" STREQUAL "")
    list(REMOVE_ITEM _r ${${b}})
  endif()
  set(${out} ${_r} PARENT_SCOPE)
endfunction()

# 1 + 2. The library's exported symbols.
execute_process(COMMAND ${NM} -D --defined-only ${LIB}
  OUTPUT_VARIABLE _nm ERROR_VARIABLE _nm_err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed (${_rc}): ${_nm_err}")
endif()
string(REPLACE "\n" ";" _lines "${_nm}")
set(_exported "")
set(_unversioned "")
foreach(_line IN LISTS _lines)
  # "<address> <type> <name>[@@version]"
  if(NOT _line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) (.+)$")
    continue()
  endif()
  set(_name "${CMAKE_MATCH_2}")
  if(CMAKE_MATCH_1 STREQUAL "A" AND _name STREQUAL VERSION_NODE)
    continue()  # the version definition itself, not a symbol
  endif()
  if(_name MATCHES "^([^@]+)@@${VERSION_NODE}$")
    list(APPEND _exported "${CMAKE_MATCH_1}")
  else()
    string(REGEX REPLACE "@.*" "" _base "${_name}")
    list(APPEND _exported "${_base}")
    list(APPEND _unversioned "${_name}")
  endif()
endforeach()
list(SORT _exported)
foreach(_s IN LISTS _unversioned)
  _fail("  ${_s}: exported without the default version @@${VERSION_NODE} (check capi/omniccl.map)")
endforeach()

# The golden list.
file(STRINGS ${GOLDEN} _golden)
set(_sorted ${_golden})
list(SORT _sorted)
list(REMOVE_DUPLICATES _sorted)
if(NOT _sorted STREQUAL _golden)
  _fail("  ${GOLDEN} is not sorted and unique (LC_ALL=C sort -u)")
endif()

_minus(_missing _golden _exported)
_minus(_extra _exported _golden)
foreach(_s IN LISTS _missing)
  _fail("  -${_s}   (in symbols.txt, not exported: removed or renamed? that breaks the ABI)")
endforeach()
foreach(_s IN LISTS _extra)
  _fail("  +${_s}   (exported, not in symbols.txt: add it if it is new API, else hide it)")
endforeach()

# 3. The golden list against the header's declarations.
file(READ ${HEADER} _header)
string(REGEX MATCHALL "(occl_status_t|const char\\*) +occl_[a-z0-9_]+\\(" _decls "${_header}")
set(_declared "")
foreach(_d IN LISTS _decls)
  string(REGEX REPLACE "^.* (occl_[a-z0-9_]+)\\($" "\\1" _d "${_d}")
  list(APPEND _declared "${_d}")
endforeach()
_minus(_undeclared _golden _declared)
_minus(_unlisted _declared _golden)
foreach(_s IN LISTS _undeclared)
  _fail("  ${_s}: in symbols.txt but not declared in omniccl.h")
endforeach()
foreach(_s IN LISTS _unlisted)
  _fail("  ${_s}: declared in omniccl.h but not in symbols.txt")
endforeach()

# 4. SONAME.
execute_process(COMMAND ${READELF} -d ${LIB}
  OUTPUT_VARIABLE _dyn ERROR_VARIABLE _dyn_err RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${LIB} failed (${_rc}): ${_dyn_err}")
endif()
if(_dyn MATCHES "Library soname: \\[([^]]*)\\]")
  if(NOT CMAKE_MATCH_1 STREQUAL SONAME)
    _fail("  SONAME is ${CMAKE_MATCH_1}, expected ${SONAME}")
  endif()
else()
  _fail("  ${LIB} has no SONAME, expected ${SONAME}")
endif()

list(LENGTH _exported _n)
if(_errors)
  message(FATAL_ERROR "The exported ABI of ${LIB} differs from ${GOLDEN}:\n${_errors}")
endif()
message(STATUS "ABI symbols: ${_n} exported, all @@${VERSION_NODE}, equal to ${GOLDEN}; SONAME ${SONAME}")
