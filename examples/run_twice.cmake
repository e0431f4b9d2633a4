# include()d by the *_resumes.cmake scripts (cmake -P): run_twice(COMMAND...)
# empties DIR, then runs the command twice, failing with its output if a run
# exits non-zero; the runs' standard outputs are left in out1 and out2.
macro(run_twice)
  file(REMOVE_RECURSE ${DIR})
  foreach(run 1 2)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "run ${run} failed (${rc}):\n${out}\n${err}")
    endif()
    set(out${run} "${out}")
  endforeach()
endmacro()
