#pragma once
// tandem-cli bench --streams 1,4,8: aggregate decode speed of several sequences decoded together
// (Session::decodeTogether), each stream count beside its roofline: the distinct routed experts a step
// reads for its sequences, over the measured memory bandwidth.
#include <string>
#include <vector>

#include "tandem/engine.h"

struct StreamsBench {
    std::string shape;            // the model's name in the report
    std::vector<int> streams;     // stream counts, one measurement each
    int promptTokens = 512;       // each stream's own random prompt
    int genSteps = 128;           // decode steps measured
    int deferral = 0;
    bool warmup = true;           // one untimed decode step first
    bool json = false;            // one JSON row per stream count
};

void runStreamsBench(tandem::Engine& engine, const StreamsBench& bench);
