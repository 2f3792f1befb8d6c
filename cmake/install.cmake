# cmake/install.cmake — what `make install PREFIX=... [DESTDIR=...]` puts where, the man pages,
# and the test that builds examples/ against the installed tree. Included at the end of
# CMakeLists.txt.
#
#   PREFIX/include/reclayer/*.h            the public headers
#   PREFIX/lib/libreclayer.so.MAJOR(.x.y)  the shared library (SONAME libreclayer.so.MAJOR) and
#   PREFIX/lib/libreclayer.a               the static one: the modules of the public API
#   PREFIX/lib/pkgconfig/reclayer.pc       `pkg-config --cflags --libs reclayer` (add --static
#                                          for the static library's private dependencies)
#   PREFIX/lib/reclayer/libfdb_c.so        FoundationDB's C API over reclayer, in a directory of
#                                          its own so that it never shadows FoundationDB's client
#   PREFIX/bin/rl, rlkvd, rlbench          the programs
#   PREFIX/share/man/man1/*.1              their man pages (help2man, from --help and --version)
#
# `make uninstall` removes exactly the files the last install wrote (build/install_manifest.txt).

install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/reclayer DESTINATION include FILES_MATCHING PATTERN "*.h")
install(TARGETS reclayer ARCHIVE DESTINATION lib)
install(TARGETS reclayer_shared LIBRARY DESTINATION lib)
install(TARGETS rl rlkvd rlbench RUNTIME DESTINATION bin)
install(TARGETS fdb_c LIBRARY DESTINATION lib/reclayer)
configure_file(${CMAKE_SOURCE_DIR}/cmake/reclayer.pc.in ${CMAKE_BINARY_DIR}/reclayer.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/reclayer.pc DESTINATION lib/pkgconfig)

# Man pages: generated from each program's --help and --version when help2man is installed
# (scripts/install-deps.sh installs it); without it the build says so and installs none.
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(RL_MAN_PAGES "")
  foreach(prog rl rlkvd rlbench)
    set(page ${CMAKE_BINARY_DIR}/man/${prog}.1)
    add_custom_command(OUTPUT ${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
      COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section=1 --output=${page}
              --name=${prog}-of-reclayer $<TARGET_FILE:${prog}>
      DEPENDS ${prog}
      COMMENT "help2man ${prog}.1")
    list(APPEND RL_MAN_PAGES ${page})
  endforeach()
  add_custom_target(man ALL DEPENDS ${RL_MAN_PAGES})
  install(FILES ${RL_MAN_PAGES} DESTINATION share/man/man1)
else()
  message(STATUS "help2man not found: no man pages (scripts/install-deps.sh installs it)")
endif()

# examples/ built against an installed copy with pkg-config and nothing else, then run: a KV
# program and a records-and-query program on file: databases, the cluster client on a fresh
# one-server cluster (scripts/test-examples.sh).
# Not in sanitizer builds: the examples are plain programs, the installed library instrumented.
if(NOT RL_SANITIZE AND NOT RL_FUZZ)
  add_test(NAME integ_examples_installed
    COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/test-examples.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
            $<TARGET_FILE:rl_with_cluster>)
  set_tests_properties(integ_examples_installed PROPERTIES LABELS "integ;cluster" TIMEOUT 300)
endif()
