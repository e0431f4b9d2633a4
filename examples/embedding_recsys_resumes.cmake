# cmake -P script: the recommender on a table of 4096 rows. Run A trains six
# steps in 4 parts; run B trains three in 4 parts, then a second process
# restores its latest checkpoint into 3 parts and trains on to six. B's
# validation losses after the restart are A's, digit for digit: table,
# accumulators and Adam's state came back whole, whatever the parts.
set(args --rows 4096 --batch 32 --save-every 2 --eval-every 2 --threads 2)
function(run name dir)
  execute_process(COMMAND ${PROGRAM} ${args} --dir ${dir} ${ARGN} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}\n${err}")
  endif()
  set(${name} "${out}" PARENT_SCOPE)
endfunction()
file(REMOVE_RECURSE ${DIR})
run(unbroken ${DIR}/a --steps 6 --partitions 4)
run(first ${DIR}/b --steps 3 --partitions 4)
run(resumed ${DIR}/b --steps 6 --partitions 3)

if(NOT unbroken MATCHES "in 4 parts" OR NOT unbroken MATCHES "trained to step 6,"
   OR NOT unbroken MATCHES "step time p50 [0-9.]+ ms, p99 [0-9.]+ ms over 6 steps")
  message(FATAL_ERROR "unbroken run:\n${unbroken}")
endif()
if(NOT resumed MATCHES "in 3 parts\nrestored [^\n]*ckpt-2 at step 3\n")
  message(FATAL_ERROR "the second process did not resume into 3 parts:\n${resumed}")
endif()
# The losses after step 4 and at the end.
foreach(out unbroken resumed)
  string(REGEX MATCHALL "validation loss [0-9.]+" losses "${${out}}")
  list(LENGTH losses n)
  math(EXPR from "${n} - 2")
  list(SUBLIST losses ${from} 2 tail_${out})
endforeach()
list(LENGTH tail_resumed n)
if(NOT n EQUAL 2 OR NOT tail_unbroken STREQUAL tail_resumed)
  message(FATAL_ERROR "resumed into 3 parts: ${tail_resumed}; unbroken: ${tail_unbroken}\n"
                      "unbroken:\n${unbroken}\nresumed:\n${resumed}")
endif()
message(STATUS "${resumed}")
