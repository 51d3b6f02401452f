/// @file main.cpp
/// castellan-worker: see worker_main.hpp.

#include "worker/worker_main.hpp"

int main(int argc, char** argv) { return castellan::worker::run_worker(argc, argv); }
