# cmake -P script: install, configure and build the consumer, run it.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/ckflow/runtime/session.h)
  message(FATAL_ERROR "headers were not installed")
endif()
if(EXISTS ${prefix}/include/ckflow/base/tensor_eigen_internal.h)
  message(FATAL_ERROR "internal headers must not be installed")
endif()

# A sanitized ckflow needs the sanitizer runtime in the consumer too.
set(flags "")
if(SANITIZE)
  set(flags "-fsanitize=${SANITIZE}")
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} "-DCMAKE_CXX_FLAGS=${flags}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer ${WORK_DIR}/ckpt)
if(NOT last_output MATCHES "restored 42")
  message(FATAL_ERROR "unexpected consumer output: ${last_output}")
endif()
message(STATUS "consumer said: ${last_output}")

# docs/guide.md's project, its ```cmake block taken as written, around the
# same program: the guide's first steps work from an installed ckflow.
file(READ ${GUIDE} guide)
string(FIND "${guide}" "```cmake\n" start)
if(start EQUAL -1)
  message(FATAL_ERROR "${GUIDE} has no ```cmake block")
endif()
math(EXPR start "${start} + 9")
string(SUBSTRING "${guide}" ${start} -1 guide)
string(FIND "${guide}" "\n```" end)
string(SUBSTRING "${guide}" 0 ${end} guide_cmake)
file(WRITE ${WORK_DIR}/guide_project/CMakeLists.txt "${guide_cmake}\n")
file(COPY_FILE ${CONSUMER_DIR}/main.cc ${WORK_DIR}/guide_project/main.cc)
run(${CMAKE_COMMAND} -S ${WORK_DIR}/guide_project -B ${WORK_DIR}/guide_build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} "-DCMAKE_CXX_FLAGS=${flags}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/guide_build)
run(${WORK_DIR}/guide_build/my_trainer ${WORK_DIR}/guide_ckpt)
if(NOT last_output MATCHES "restored 42")
  message(FATAL_ERROR "unexpected output of the guide's project: ${last_output}")
endif()

# ckflow built with MPI: the package has ckflow::distributed, and a program
# linking it runs under mpirun (as root here, as ctest's other MPI tests).
if(DISTRIBUTED)
  if(NOT EXISTS ${prefix}/include/ckflow/distributed/worker_group.h)
    message(FATAL_ERROR "distributed/ headers were not installed")
  endif()
  if(NOT EXISTS ${WORK_DIR}/build/consumer_distributed)
    message(FATAL_ERROR "the package has no ckflow::distributed target")
  endif()
  run(${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      ASAN_OPTIONS=detect_leaks=0 ${MPIEXEC} --oversubscribe -np 2
      ${WORK_DIR}/build/consumer_distributed ${WORK_DIR}/distributed_ckpt)
  if(NOT last_output MATCHES "rank 0 of 2 restored 42" OR
     NOT last_output MATCHES "rank 1 of 2 restored 42")
    message(FATAL_ERROR "unexpected consumer_distributed output: ${last_output}")
  endif()
  message(STATUS "consumer_distributed said: ${last_output}")
endif()
