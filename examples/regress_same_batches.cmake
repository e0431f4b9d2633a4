# cmake -P script: a regress run stopped and resumed, and one whose newest
# checkpoint is lost as to a kill during its save, see the same batches, step
# for step, as a run that never stopped (--print-batches: "batch STEP DIGEST").
function(run_regress dir steps out)
  execute_process(COMMAND ${REGRESS} --steps ${steps} --save-every 10 --print-batches
                          --dir ${dir}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "regress --steps ${steps} --dir ${dir} failed (${rc}):\n${stdout}\n${stderr}")
  endif()
  string(REGEX MATCHALL "batch [0-9]+ [0-9a-f]+" batches "${stdout}")
  set(${out} "${batches}" PARENT_SCOPE)
  set(${out}_text "${stdout}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${DIR})
run_regress(${DIR}/uninterrupted 60 whole)
list(LENGTH whole n)
set(distinct_batches ${whole})
list(REMOVE_DUPLICATES distinct_batches)
list(LENGTH distinct_batches distinct)
if(NOT n EQUAL 60 OR NOT distinct EQUAL 60)
  message(FATAL_ERROR "expected 60 different batches:\n${whole_text}")
endif()

# Stopped after step 25 (saved there), resumed for 35 more.
run_regress(${DIR}/stopped 25 first)
run_regress(${DIR}/stopped 35 second)
list(APPEND first ${second})
if(NOT first STREQUAL whole)
  message(FATAL_ERROR "stopped and resumed, the batches differ from one run's:\n"
                      "${first_text}${second_text}")
endif()

# Killed while saving step 25: that checkpoint's data is cut short, so the
# next run falls back to step 20 and trains steps 21..60 again.
run_regress(${DIR}/killed 25 ignored)
file(GLOB data ${DIR}/killed/ckpt-3.data-*)
file(WRITE ${data} "")
run_regress(${DIR}/killed 40 again)
if(NOT again_text MATCHES "restored [^\n]*ckpt-2 at step 20")
  message(FATAL_ERROR "did not resume at step 20:\n${again_text}")
endif()
list(SUBLIST whole 20 40 tail)
if(NOT again STREQUAL tail)
  message(FATAL_ERROR "resumed past a lost checkpoint, the batches differ:\n${again_text}")
endif()
message(STATUS "60 batches, the same stopped at 25 and resumed, and resumed at 20")
