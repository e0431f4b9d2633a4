# cmake -P script: the eager regress example trains and saves; a second run
# restores on creation and continues: its step and save_counter go on, and
# its model, restored as the layers build, gives exactly the loss the first
# run ended with.
include(${CMAKE_CURRENT_LIST_DIR}/run_twice.cmake)
run_twice(${REGRESS} --steps 60 --dir ${DIR})
if(NOT out1 MATCHES "no checkpoint: starting at step 0" OR NOT out1 MATCHES "step 60,"
   OR NOT out1 MATCHES "save_counter 1\\)")
  message(FATAL_ERROR "first run:\n${out1}")
endif()
if(NOT out2 MATCHES "restored [^\n]*ckpt-1 at step 60" OR NOT out2 MATCHES "step 120,"
   OR NOT out2 MATCHES "save_counter 2\\)")
  message(FATAL_ERROR "second run did not resume:\n${out2}")
endif()
string(REGEX MATCH "eval loss at end ([^\n]*)" _ "${out1}")
set(end1 "${CMAKE_MATCH_1}")
string(REGEX MATCH "eval loss at start ([^\n]*)" _ "${out2}")
if(NOT CMAKE_MATCH_1 STREQUAL end1)
  message(FATAL_ERROR "the restored model's loss ${CMAKE_MATCH_1} is not the saved one's ${end1}")
endif()
message(STATUS "${out2}")
