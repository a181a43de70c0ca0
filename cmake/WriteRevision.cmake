# Writes OUTPUT, a header defining TANDEM_GIT_REVISION as `git describe` of SOURCE_DIR, and rewrites it
# only when the revision changed, so an unchanged checkout rebuilds nothing. Run at every build (not at
# configure time) so a commit or an edit shows up without re-running CMake.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -P WriteRevision.cmake
set(revision "unknown")
find_package(Git QUIET)
if(GIT_EXECUTABLE)
  # A source tarball has no history: "unknown" says so instead of failing the build. One unpacked
  # inside another git checkout must not report that checkout's revision.
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --show-toplevel
                  OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE failed ERROR_QUIET)
  file(REAL_PATH "${SOURCE_DIR}" source)
  if(NOT failed AND top)
    file(REAL_PATH "${top}" top)
  endif()
  if(NOT failed AND top STREQUAL source)
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                    OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE failed ERROR_QUIET)
    if(NOT failed AND described)
      set(revision "${described}")
    endif()
  endif()
endif()
set(text "#pragma once\n#define TANDEM_GIT_REVISION \"${revision}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
