# cmake -P script: the Fashion-MNIST example trains a few steps on the
# slice in DATA (256 images: 8 steps of 32 per epoch), saves, evaluates and
# saves its weights; a second run resumes from the latest checkpoint and
# finishes the two epochs.
include(${CMAKE_CURRENT_LIST_DIR}/run_twice.cmake)
run_twice(${PROGRAM} --data ${DATA} --dir ${DIR} --epochs 2 --batch 32 --save-every 2
          --max-steps 5 --threads 2)
if(NOT out1 MATCHES "no checkpoint: initialized at step 0" OR NOT out1 MATCHES "trained to step 5,"
   OR NOT out1 MATCHES "test accuracy 0\\.[0-9][0-9][0-9][0-9]\n$")
  message(FATAL_ERROR "first run:\n${out1}")
endif()
if(NOT out2 MATCHES "restored [^\n]*ckpt-3 at step 5" OR NOT out2 MATCHES "trained to step 10,"
   OR NOT out2 MATCHES "test accuracy 0\\.[0-9][0-9][0-9][0-9]\n$")
  message(FATAL_ERROR "second run did not resume:\n${out2}")
endif()
if(NOT EXISTS ${DIR}/weights/model.index)
  message(FATAL_ERROR "no weights saved in ${DIR}")
endif()
message(STATUS "${out2}")
