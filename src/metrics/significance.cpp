// The implementation of metrics/significance.h (the contract is there).
#include "metrics/significance.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>

namespace pagoda::metrics {

MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b) {
    MannWhitney out;
    const size_t n1 = a.size(), n2 = b.size();
    if (n1 == 0 || n2 == 0) return out;
    std::vector<std::pair<double, int>> all;
    all.reserve(n1 + n2);
    for (double x : a) all.emplace_back(x, 0);
    for (double x : b) all.emplace_back(x, 1);
    std::sort(all.begin(), all.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    double rank_sum_a = 0, tie_term = 0;
    const double n = double(n1 + n2);
    for (size_t i = 0; i < all.size();) {
        size_t j = i;
        while (j < all.size() && all[j].first == all[i].first) ++j;
        double avg_rank = (double(i) + double(j) + 1) / 2;  // ranks are 1-based
        double t = double(j - i);
        tie_term += t * t * t - t;
        for (size_t k = i; k < j; ++k) {
            if (all[k].second == 0) rank_sum_a += avg_rank;
        }
        i = j;
    }
    out.u = rank_sum_a - double(n1) * double(n1 + 1) / 2;
    double mu = double(n1) * double(n2) / 2;
    double var = double(n1) * double(n2) / 12 * ((n + 1) - tie_term / (n * (n - 1)));
    if (var <= 0) return out;
    double diff = out.u - mu;
    // Continuity correction toward the mean.
    diff = diff > 0 ? std::max(0.0, diff - 0.5) : std::min(0.0, diff + 0.5);
    out.z = diff / std::sqrt(var);
    out.p_value = std::erfc(std::fabs(out.z) / std::sqrt(2.0));
    return out;
}

double ci95_half_width(const std::vector<double>& v) {
    if (v.size() < 2) return 0;
    // Two-sided 95%: the 97.5% quantile of Student's t with n - 1 degrees of freedom.
    const boost::math::students_t dist(double(v.size() - 1));
    const double q = boost::math::quantile(dist, 0.975);
    double mean = 0;
    for (double x : v) mean += x;
    mean /= double(v.size());
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    return q * std::sqrt(ss / double(v.size() - 1)) / std::sqrt(double(v.size()));
}

}  // namespace pagoda::metrics
