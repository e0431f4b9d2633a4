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

# The newest checkpoint loses the end of its data file (a copy cut short):
# the third run skips it, saying why, and resumes from the one before.
file(GLOB data ${DIR}/ckpt-6.data-*)
file(WRITE ${data} "")
execute_process(COMMAND ${REGRESS} --steps 60 --save-every 25 --dir ${DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out3 ERROR_VARIABLE err3)
if(NOT rc EQUAL 0 OR NOT err3 MATCHES "skipping checkpoint '[^\n]*ckpt-6'[^\n]*truncated"
   OR NOT out3 MATCHES "restored [^\n]*ckpt-5 at step 110" OR NOT out3 MATCHES "global step 170,")
  message(FATAL_ERROR "third run did not fall back past the damaged checkpoint:\n${out3}\n${err3}")
endif()
message(STATUS "${out3}")
