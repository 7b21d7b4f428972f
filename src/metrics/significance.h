#pragma once
// Significance statistics shared by `pagoda bench` (baseline comparison) and the router's
// canary judge: the Mann-Whitney U test and the 95% confidence half-width of a mean.

#include <vector>

namespace pagoda::metrics {

// Mann-Whitney U test (two-sided, normal approximation with tie correction).
struct MannWhitney {
    double u = 0, z = 0, p_value = 1;
};
MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b);

// Half-width of the 95% confidence interval of the mean (Student's t); 0 below 2 values.
double ci95_half_width(const std::vector<double>& values);

}  // namespace pagoda::metrics
