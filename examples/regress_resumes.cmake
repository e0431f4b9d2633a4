# cmake -P script: the regress example trains, saves (asynchronously) and a
# second run resumes from its latest checkpoint.
include(${CMAKE_CURRENT_LIST_DIR}/run_twice.cmake)
run_twice(${REGRESS} --steps 60 --save-every 25 --dir ${DIR})
if(NOT out1 MATCHES "no checkpoint: initialized at step 0" OR NOT out1 MATCHES "global step 60,")
  message(FATAL_ERROR "first run:\n${out1}")
endif()
if(NOT out2 MATCHES "restored [^\n]*ckpt-3 at step 60" OR NOT out2 MATCHES "global step 120,"
   OR NOT out2 MATCHES "save_counter 6")
  message(FATAL_ERROR "second run did not resume:\n${out2}")
endif()
message(STATUS "${out2}")
