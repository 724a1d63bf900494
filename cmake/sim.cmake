# cmake/sim.cmake: the discrete-event simulator, the placement solvers and headsplit-sim.
# The simulator sits on hs_plan (placement and model accounting) and never on hs_engine: no MPI.
if(TARGET hs_sim)
  return()  # included twice (the cmake/*.cmake glob and HEADSPLIT_EXTRA_CMAKE)
endif()
file(GLOB SIM_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/sim/*.c)
add_library(hs_sim STATIC ${SIM_SRC})
target_include_directories(hs_sim PUBLIC ${CMAKE_SOURCE_DIR}/include/sim)
target_link_libraries(hs_sim PUBLIC hs_plan)
# The device catalogue that --hetero draws from (scripts/emulate-device reads the same file);
# $HEADSPLIT_DEVICE_CATALOGUE overrides it at run time.
target_compile_definitions(hs_sim PRIVATE
  HEADSPLIT_CATALOGUE="${CMAKE_SOURCE_DIR}/share/devices.tsv")
add_executable(headsplit-sim ${CMAKE_SOURCE_DIR}/src/app/sim.c)
target_link_libraries(headsplit-sim PRIVATE hs_sim hs_convert)
# The unit tests are globbed in tests/CMakeLists.txt (included before this file).
foreach(t test_sim test_solver)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE hs_sim)
  endif()
endforeach()
