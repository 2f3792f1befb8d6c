# cmake/fdbc.cmake — libfdb_c.so over reclayer (docs/design.md §8.8) and the tests of the fdb: backend.
# Included at the end of CMakeLists.txt (after the modules, programs and tests are defined).
#
#   build/fdb/libfdb_c.so   FoundationDB's C API (API versions 610-730) over reclayer's public API:
#                           src/fdbc/*.c plus the objects of the modules it needs (base .. kv;
#                           every object is built position independent). Soname
#                           libfdb_c.so; only fdb_* symbols are exported (cmake/fdbc.map), so the
#                           library carries its own private copy of reclayer.
#   ctest *_fdb             the KV, record and query unit suites through the fdb: backend
#                           (src/kv/fdb/) loading build/fdb/libfdb_c.so, over mem: (RL_FDBC_URL)
#   ctest *_fdb_defer       the same over defer:mem: (every completion late, on another thread)
#   ctest *_fdb_real        the same against a real FoundationDB cluster, registered only when
#                           configured with -DRL_TEST_FDB_CLUSTER=FILE (its cluster file); they fail,
#                           saying why, if the file or FoundationDB's client library is missing
#   make install            installs libfdb_c.so into PREFIX/lib/reclayer (cmake/install.cmake)

set(RL_FDBC_MODULES base tuple storage commit net kv)
set(RL_FDBC_OBJECTS "")
foreach(mod ${RL_FDBC_MODULES})
  list(APPEND RL_FDBC_OBJECTS $<TARGET_OBJECTS:rl_${mod}_obj>)
endforeach()
file(GLOB RL_FDBC_OWN CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/fdbc/*.c)

add_library(fdb_c SHARED ${RL_FDBC_OWN} ${RL_FDBC_OBJECTS})
set_target_properties(fdb_c PROPERTIES
  OUTPUT_NAME fdb_c
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fdb
  POSITION_INDEPENDENT_CODE ON
  LINK_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/fdbc.map)
target_include_directories(fdb_c PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src ${RL_PROTO_DIR})
foreach(mod ${RL_FDBC_MODULES})
  foreach(lib ${RL_EXT_${mod}})
    target_link_libraries(fdb_c PRIVATE ${lib})
  endforeach()
endforeach()
# -z nodelete: like FoundationDB's client, the library is never unloaded (a network thread may run
# in it); -Bsymbolic: its own references never bind to a reclayer linked into the program.
target_link_options(fdb_c PRIVATE
  -Wl,--version-script=${CMAKE_SOURCE_DIR}/cmake/fdbc.map -Wl,-z,nodelete -Wl,-Bsymbolic)

set(RL_FDBC_LIB ${CMAKE_BINARY_DIR}/fdb/libfdb_c.so)

# fdbc-2.3 needs a cluster: the version test once more against a fresh one-server cluster.
if(TARGET integ_kv_test_fdbc_versions AND TARGET rl_with_cluster)
  add_test(NAME integ_kv_test_fdbc_versions_cluster1
           COMMAND rl_with_cluster --storage 1 -- $<TARGET_FILE:integ_kv_test_fdbc_versions>)
  set_tests_properties(integ_kv_test_fdbc_versions_cluster1 PROPERTIES LABELS "integ;cluster;fdb" TIMEOUT 300
    ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;RL_FDBC_LIB=${RL_FDBC_LIB}")
endif()

# fdbc-watch: the watch tests once more against a fresh one-server cluster (the storage server
# holds the watches).
if(TARGET integ_kv_test_fdbc_watch AND TARGET rl_with_cluster)
  add_test(NAME integ_kv_test_fdbc_watch_cluster1
           COMMAND rl_with_cluster --storage 1 -- $<TARGET_FILE:integ_kv_test_fdbc_watch>)
  set_tests_properties(integ_kv_test_fdbc_watch_cluster1 PROPERTIES LABELS "integ;cluster;fdb" TIMEOUT 300
    ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;RL_FDBC_LIB=${RL_FDBC_LIB}")
endif()

# Test programs that load the library (tests/integ/kv/test_fdbc_*.c, test_fdb_backend*.c) must find
# it built.
file(GLOB RL_FDBC_TESTS CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/tests/integ/kv/test_fdbc_*.c
  ${CMAKE_SOURCE_DIR}/tests/integ/kv/test_fdb_backend*.c)
foreach(t ${RL_FDBC_TESTS})
  get_filename_component(stem ${t} NAME_WE)
  if(TARGET integ_kv_${stem})
    add_dependencies(integ_kv_${stem} fdb_c)
    set_tests_properties(integ_kv_${stem} PROPERTIES
      ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;RL_FDBC_LIB=${RL_FDBC_LIB}")
  endif()
endforeach()

# The KV, record and query suites through the fdb: backend (programs that open rl_test_url(); the
# cluster client's own logic tests are left out, as in CMakeLists.txt's cluster block):
#   *_fdb           reclayer's libfdb_c.so over mem:
#   *_fdb_defer     ... over defer:mem: (completions late, on another thread)
#   *_fdb_cluster1  ... over a fresh one-server local cluster (rl_with_cluster); skipped (77) until
#                   the cluster parts are built, as the *_cluster1 runs
#   *_fdb_real      FoundationDB itself (cmake/fdb-real.sh; only with -DRL_TEST_FDB_CLUSTER=FILE)
# Label "fdb": ctest -L fdb runs them all.
foreach(mod kv record query)
  file(GLOB RL_FDB_SUITE CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/${mod}/test_*.c)
  foreach(t ${RL_FDB_SUITE})
    get_filename_component(stem ${t} NAME_WE)
    file(STRINGS ${t} uses_url REGEX "kvt_open|rl_test_url|qt_open|rl_test_db_open")
    if(NOT uses_url OR stem MATCHES "^test_cluster")
      continue()
    endif()
    set(exe unit_${mod}_${stem})
    add_test(NAME ${exe}_fdb COMMAND ${exe})
    set_tests_properties(${exe}_fdb PROPERTIES LABELS "unit;fdb" TIMEOUT 600 ENVIRONMENT
      "RL_TEST_URL=fdb:;RL_FDB_LIBRARY=${RL_FDBC_LIB};RL_FDBC_URL=mem:;CMOCKA_MESSAGE_OUTPUT=stdout")
    add_test(NAME ${exe}_fdb_defer COMMAND ${exe})
    set_tests_properties(${exe}_fdb_defer PROPERTIES LABELS "unit;fdb" TIMEOUT 600 ENVIRONMENT
      "RL_TEST_URL=fdb:;RL_FDB_LIBRARY=${RL_FDBC_LIB};RL_FDBC_URL=defer:mem:;CMOCKA_MESSAGE_OUTPUT=stdout")
    if(TARGET rl_with_cluster)
      add_test(NAME ${exe}_fdb_cluster1 COMMAND rl_with_cluster --storage 1 --
               sh ${CMAKE_SOURCE_DIR}/cmake/fdb-over.sh $<TARGET_FILE:${exe}>)
      set_tests_properties(${exe}_fdb_cluster1 PROPERTIES LABELS "unit;cluster;fdb" TIMEOUT 600
        ENVIRONMENT "RL_FDB_LIBRARY=${RL_FDBC_LIB};CMOCKA_MESSAGE_OUTPUT=stdout")
    endif()
    if(RL_TEST_FDB_CLUSTER)
      add_test(NAME ${exe}_fdb_real COMMAND sh ${CMAKE_SOURCE_DIR}/cmake/fdb-real.sh $<TARGET_FILE:${exe}>)
      set_tests_properties(${exe}_fdb_real PROPERTIES LABELS "unit;fdb" TIMEOUT 600
        ENVIRONMENT "RL_TEST_FDB_CLUSTER=${RL_TEST_FDB_CLUSTER};CMOCKA_MESSAGE_OUTPUT=stdout")
    endif()
  endforeach()
endforeach()
include(cmake/fdbc-node.cmake)

# `rlbench campaign` on the fdb topology (tests/integ/bench/test_campaign_fdb.c) loads the library
# through RL_FDB_LIBRARY in its workers: build it first.
if(TARGET integ_bench_test_campaign_fdb)
  add_dependencies(integ_bench_test_campaign_fdb fdb_c)
  set_property(TEST integ_bench_test_campaign_fdb APPEND PROPERTY LABELS "cluster;fdb")
endif()
