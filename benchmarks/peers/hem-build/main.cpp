// The entry point fastpubsub's driver (benchmarks/peers/hem.py) builds the HEM repository's program with, in place
// of theirs: the same ten arguments and data, the four algorithms compared (or those HEM_RUN names), and a first
// line with the compile-time settings, so that every result carries the settings it ran at.
#include "run_models.h"
#include <cstdlib>

int main(int argc, char** argv)
{
	// expID atts cons m alpha width be attrGroup valDom parallelDegree: the globals of their constant.cpp
	if (argc == 11)
	{
		auto integer = [&](int i) { return std::stoi(argv[i]); };
		expID = std::to_string(integer(1));
		atts = integer(2), cons = integer(3), m = integer(4);
		alpha = std::stod(argv[5]), width = std::stod(argv[6]);
		be = integer(7), attrGroup = integer(8), valDom = integer(9), parallelDegree = integer(10);
	}
	std::cout << "settings: subs= " << subs << " pubs= " << pubs << " buks= " << buks << " be= " << be
			  << " level= " << level << " segments= " << SEGMENTS << " signatures= " << MAX_SIGNATURE << std::endl;

	const char* named = std::getenv("HEM_RUN");
	const std::string chosen = "," + std::string(named ? named : "rein,hem5dd,tama,opindex") + ",";
	auto runs = [&](const char* name) { return chosen.find("," + std::string(name) + ",") != std::string::npos; };

	intervalGenerator gen(subs, pubs, atts, attrGroup, cons, m, attNumType, attDis, valDis, valDom, alpha, subp, width);
	gen.GenSubList();
	gen.GenPubList();
	unordered_map<int, bool> none;  // no deletions are verified (verifyID is false)

	if (runs("rein")) run_rein(gen, none);
	if (runs("hem5dd")) run_HEM5(gen, none);
	if (runs("tama")) run_tama_forward_native(gen, none);
	if (runs("opindex")) run_OpIndex(gen, none);
	std::cout << "Done.\n";
	return 0;
}
