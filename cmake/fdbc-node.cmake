# cmake/fdbc-node.cmake — FoundationDB's Node.js binding (npm `foundationdb`, unmodified: its
# prebuilt addon links libfdb_c.so by name) on reclayer's build/fdb/libfdb_c.so:
#   ctest integ_fdbc_node_binding           over an embedded mem: database (RL_FDBC_URL)
#   ctest integ_fdbc_node_binding_cluster1  over a fresh one-server local cluster (rl_with_cluster)
# Both skip (77), saying why, without node or the installed binding (scripts/install-node-binding.sh,
# run by make deps). Not registered in sanitizer builds: node would load an ASan-instrumented
# library without the ASan runtime.
if(NOT RL_SANITIZE)
  add_test(NAME integ_fdbc_node_binding
           COMMAND sh ${CMAKE_SOURCE_DIR}/cmake/node-binding.sh ${CMAKE_SOURCE_DIR} ${RL_FDBC_LIB})
  set_tests_properties(integ_fdbc_node_binding PROPERTIES LABELS "integ;fdb" TIMEOUT 120
    SKIP_RETURN_CODE 77)
  if(TARGET rl_with_cluster)
    add_test(NAME integ_fdbc_node_binding_cluster1
             COMMAND rl_with_cluster --storage 1 --
                     sh ${CMAKE_SOURCE_DIR}/cmake/node-binding.sh ${CMAKE_SOURCE_DIR} ${RL_FDBC_LIB})
    set_tests_properties(integ_fdbc_node_binding_cluster1 PROPERTIES LABELS "integ;cluster;fdb"
      TIMEOUT 180 SKIP_RETURN_CODE 77)
  endif()
endif()
