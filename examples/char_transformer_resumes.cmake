# cmake -P script: the transformer example, tiny (1 block, windows of 16
# bytes, 4 per step), trains 3 steps and saves; a second run restores the
# latest checkpoint and trains on to step 5. Both print a validation loss
# and a sample.
file(REMOVE_RECURSE ${DIR})
set(args --dir ${DIR} --batch 4 --context 16 --blocks 1 --save-every 2 --eval-every 2 --threads 2)
foreach(run 1 2)
  math(EXPR steps "1 + 2 * ${run}")
  execute_process(COMMAND ${PROGRAM} ${args} --steps ${steps} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run ${run} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out${run} "${out}")
endforeach()
if(NOT out1 MATCHES "unigram entropy [0-9]\\.[0-9]+ nats/char"
   OR NOT out1 MATCHES "no checkpoint: initialized at step 0"
   OR NOT out1 MATCHES "validation loss [0-9]+\\.[0-9][0-9][0-9][0-9]\n"
   OR NOT out1 MATCHES "trained to step 3," OR NOT out1 MATCHES "sample: ")
  message(FATAL_ERROR "first run:\n${out1}")
endif()
if(NOT out2 MATCHES "restored [^\n]*ckpt-2 at step 3" OR NOT out2 MATCHES "trained to step 5,"
   OR NOT out2 MATCHES "validation loss [0-9]+\\.[0-9][0-9][0-9][0-9]\n$")
  message(FATAL_ERROR "second run did not resume:\n${out2}")
endif()
message(STATUS "${out2}")
